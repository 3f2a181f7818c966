//! The log record format of a stored event.
