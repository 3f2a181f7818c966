"""A small MCP server on the official Python SDK (FastMCP), run behind `taskstream gateway` by
the gateway's tests. Nothing in it knows of taskstream: it reports progress and log messages as
any FastMCP tool does.

Tools:
  count(n, delay_ms=0)  reports progress i/n with a message and logs "step i" for each step,
                        then answers "counted to n"
  wait()                waits until cancelled (for cancellation tests)
  fail()                raises, so the SDK answers an error result
A resource `note://hello` and a prompt `greet(name)` check that other requests are passed on.
"""

import anyio
from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("fastmcp-progress")


@mcp.tool()
async def count(n: int, ctx: Context, delay_ms: int = 0) -> str:
    """Counts to n, reporting progress and a log message per step."""
    for i in range(1, n + 1):
        if delay_ms:
            await anyio.sleep(delay_ms / 1000)
        await ctx.info(f"step {i}")
        await ctx.report_progress(i, n, f"step {i} of {n}")
    return f"counted to {n}"


@mcp.tool()
async def wait(ctx: Context) -> str:
    """Waits until the call is cancelled."""
    await ctx.report_progress(0, None, "waiting")
    await anyio.sleep(3600)
    return "woke up"


@mcp.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


@mcp.resource("note://hello")
def hello_note() -> str:
    """A fixed note."""
    return "hello from the inner server"


@mcp.prompt()
def greet(name: str) -> str:
    """A greeting prompt."""
    return f"Say hello to {name}."


if __name__ == "__main__":
    mcp.run()
