//! The process's stdin and stdout as the runtime's own non-blocking I/O.
//!
//! An MCP client that spawns its server gives it pipes (Python's and Rust's subprocess
//! modules) or socket pairs (Node's, through libuv). Either kind is read and written on the
//! runtime — registered with its reactor like any connection — so a message crosses no thread
//! on its way in or out. Anything else (a terminal, a file) is left alone: the caller serves it
//! with threads of its own.
//!
//! Non-blocking mode is a flag of the open pipe or socket end, which whoever gave it to us may
//! share and go on using after we exit; [`blocking_again`] clears it at the end.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// stdin, read on the runtime.
pub(super) type Input = Box<dyn AsyncRead + Unpin + Send>;
/// stdout, written on the runtime.
pub(super) type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// What a standard stream is, as far as the runtime can take it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FdKind {
    Pipe,
    Socket,
}

impl FdKind {
    fn of(fd: BorrowedFd<'_>) -> Option<Self> {
        use std::os::unix::fs::FileTypeExt as _;
        let kind = std::fs::File::from(fd.try_clone_to_owned().ok()?)
            .metadata()
            .ok()?
            .file_type();
        if kind.is_fifo() {
            Some(Self::Pipe)
        } else if kind.is_socket() {
            Some(Self::Socket)
        } else {
            None
        }
    }
}

/// stdin and stdout on the runtime, when both are pipes or sockets (checked before either is
/// changed).
pub(super) fn runtime_stdio() -> Option<(Input, Output)> {
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    let kinds = (FdKind::of(stdin.as_fd())?, FdKind::of(stdout.as_fd())?);
    let taken = (|| {
        let input: Input = match kinds.0 {
            FdKind::Pipe => Box::new(pipe::Receiver::from_owned_fd(dup(&stdin)?)?),
            FdKind::Socket => Box::new(socket(dup(&stdin)?)?),
        };
        let output: Output = match kinds.1 {
            FdKind::Pipe => Box::new(pipe::Sender::from_owned_fd(dup(&stdout)?)?),
            FdKind::Socket => Box::new(socket(dup(&stdout)?)?),
        };
        std::io::Result::Ok((input, output))
    })();
    match taken {
        Ok(io) => Some(io),
        Err(e) => {
            tracing::debug!(error = %e, "stdio stays on threads");
            blocking_again();
            None
        }
    }
}

/// Puts stdin and stdout back in blocking mode, whichever kind each is.
pub(super) fn blocking_again() {
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    for (fd, reads) in [(stdin.as_fd(), true), (stdout.as_fd(), false)] {
        let Ok(owned) = fd.try_clone_to_owned() else {
            continue;
        };
        let _ = match FdKind::of(owned.as_fd()) {
            Some(FdKind::Socket) => {
                std::os::unix::net::UnixStream::from(owned).set_nonblocking(false)
            }
            Some(FdKind::Pipe) if reads => pipe::Receiver::from_owned_fd_unchecked(owned)
                .and_then(|p| p.into_blocking_fd().map(drop)),
            Some(FdKind::Pipe) => pipe::Sender::from_owned_fd_unchecked(owned)
                .and_then(|p| p.into_blocking_fd().map(drop)),
            None => Ok(()),
        };
    }
}

fn dup(stream: &impl AsFd) -> std::io::Result<OwnedFd> {
    stream.as_fd().try_clone_to_owned()
}

/// A stream socket (any family: only reads and writes are asked of it) on the runtime.
fn socket(fd: OwnedFd) -> std::io::Result<UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.set_nonblocking(true)?;
    UnixStream::from_std(socket)
}
