//! The connections of `serve --http`: accepted under `--max-connections`, each served by
//! hyper's HTTP/1.1 connection over a [`Watched`] socket that bounds, in time, what a client
//! that sends or reads nothing can hold:
//!
//! - **a head** (the request line and headers) must arrive within `--header-timeout` of its
//!   first byte; a client that trickles one is answered 408 and closed (slowloris);
//! - **an idle connection** (no request in flight, no byte of a new one) is closed after
//!   `--idle-timeout`;
//! - **a write** that makes no progress for `--write-stall-timeout` (the client reads nothing
//!   and its receive window and our send buffer are full) fails the connection, so hyper drops
//!   the response and everything it held is given back: a stream's slot, its connection hold
//!   (the stalled reader of the chapter, §7).
//!
//! Which of the first two applies is told by the connection's [`Activity`]: the service
//! counts the requests whose response is not finished, so neither fires while an answer is
//! being prepared or a stream is open (a quiet stream still writes a keep-alive comment every
//! few seconds). A body's own deadline (`--body-timeout`) is the handler's, which answers 408.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

use crate::config::HttpLimits;
use crate::log::log;

/// What a refused connection is told before it is closed (`--max-connections`).
const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\
Retry-After: 1\r\nContent-Type: text/plain\r\nContent-Length: 50\r\n\r\n\
Service Unavailable: too many connections (retry)\n";
/// What a client whose head did not arrive in time is told before it is closed.
const HEAD_TIMED_OUT: &[u8] = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\
Content-Type: text/plain\r\nContent-Length: 59\r\n\r\n\
Request Timeout: the request head did not arrive in time.\n";

/// The time bounds of one connection (from [`HttpLimits`]).
#[derive(Clone, Copy, Debug)]
struct Bounds {
    header: Duration,
    idle: Duration,
    write_stall: Duration,
}

/// What a connection's socket and its requests share: the requests in flight.
#[derive(Debug, Default)]
pub(super) struct Activity {
    /// Requests whose response is not finished (hyper has not dropped its body yet).
    busy: AtomicUsize,
    /// Bumped each time `busy` drops to zero: the socket starts its idle clock anew.
    idle_epoch: AtomicU64,
}

impl Activity {
    /// Marks a request in flight until the returned guard is dropped.
    fn enter(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(self))
    }

    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }
}

/// A request in flight; dropped with its response's body.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        // The epoch first, so that a socket that sees `busy == 0` also sees the new epoch.
        self.0.idle_epoch.fetch_add(1, Ordering::AcqRel);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A TCP connection with the deadlines of the module's docs.
pub(super) struct Watched {
    io: TcpStream,
    bounds: Bounds,
    activity: Arc<Activity>,
    /// The idle epoch the clock below was started in.
    epoch: u64,
    /// When the connection last became idle.
    idle_since: Instant,
    /// When the head being received must be complete (set by its first byte).
    head_deadline: Option<Instant>,
    /// The read side's timer (idle or head), reset to whichever deadline applies.
    read_timer: Pin<Box<Sleep>>,
    /// Set when a write first found no room; cleared by any progress.
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl Watched {
    fn new(io: TcpStream, bounds: Bounds, activity: Arc<Activity>) -> Watched {
        let now = Instant::now();
        Watched {
            io,
            bounds,
            epoch: activity.idle_epoch.load(Ordering::Acquire),
            activity,
            idle_since: now,
            head_deadline: None,
            read_timer: Box::pin(tokio::time::sleep_until(now + bounds.idle)),
            write_timer: None,
        }
    }

    /// Restarts the idle clock if a request ended since it was started.
    fn catch_up(&mut self) {
        let epoch = self.activity.idle_epoch.load(Ordering::Acquire);
        if epoch != self.epoch {
            self.epoch = epoch;
            self.idle_since = Instant::now();
            self.head_deadline = None;
        }
    }

    /// A write found no room: pending until the stall bound, then an error.
    fn stalled<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let stall = self.bounds.write_stall;
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
        if timer.as_mut().poll(cx).is_ready() {
            log!(
                Debug,
                "closed a connection whose client read nothing for {stall:?}"
            );
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for --write-stall-timeout",
            )));
        }
        Poll::Pending
    }

    /// A write made progress (or failed for another reason).
    fn progressed<T>(
        &mut self,
        r: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.write_timer = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.stalled(cx),
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before && this.activity.is_idle() {
                    this.catch_up();
                    if this.head_deadline.is_none() {
                        this.head_deadline = Some(Instant::now() + this.bounds.header);
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                if !this.activity.is_idle() {
                    // A request in flight: its body's deadline and the write stall bound apply.
                    return Poll::Pending;
                }
                this.catch_up();
                let deadline = this
                    .head_deadline
                    .unwrap_or(this.idle_since + this.bounds.idle);
                if this.read_timer.deadline() != deadline {
                    this.read_timer.as_mut().reset(deadline);
                }
                if this.read_timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if this.head_deadline.is_some() {
                    // Best effort: nothing else is being written while a head is awaited.
                    let _ = this.io.try_write(HEAD_TIMED_OUT);
                    log!(
                        Debug,
                        "closed a connection whose request head did not arrive in time"
                    );
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the request head did not arrive within --header-timeout",
                    )));
                }
                // Idle too long: an end of input, which hyper takes as a clean close.
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.progressed(r, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.progressed(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.progressed(r, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Accepts connections on `listener` and serves each with `app` until `stop` completes, then
/// lets open responses finish for up to `grace`.
pub(super) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: HttpLimits,
    stop: impl Future<Output = ()>,
    grace: Duration,
) {
    let bounds = Bounds {
        header: limits.header_timeout,
        idle: limits.idle_timeout,
        write_stall: limits.write_stall_timeout,
    };
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            a = listener.accept() => a,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors, most often: wait a moment instead of spinning.
                log!(Debug, "accept: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            let _ = tcp.try_write(TOO_MANY_CONNECTIONS);
            log!(Debug, "refused a connection: --max-connections reached");
            continue;
        };
        // Small SSE frames go out at once (no Nagle delay behind the headers).
        if let Err(e) = tcp.set_nodelay(true) {
            log!(Debug, "TCP_NODELAY: {e}");
        }
        let activity = Arc::new(Activity::default());
        let io = TokioIo::new(Watched::new(tcp, bounds, Arc::clone(&activity)));
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let busy = activity.enter();
            let answer = tower_service::Service::call(&mut app.clone(), request.map(Body::new));
            async move {
                let response: Response = match answer.await {
                    Ok(r) => r,
                    Err(never) => match never {},
                };
                // The request stays in flight until hyper drops the body it is sending.
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
                        let _in_flight = &busy;
                        frame
                    }))
                }))
            }
        });
        let connection = hyper::server::conn::http1::Builder::new()
            // The head's deadline is the socket's (a 408 before closing); hyper's own would
            // close without a word.
            .header_read_timeout(None)
            .serve_connection(io, service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                log!(Debug, "connection ended: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        log!(Debug, "open responses outlived the shutdown grace period");
    }
}
