//! A watcher thread that notes when bytes reach the sockets it is told to watch, before the
//! request's own task reads them: Linux keeps one receive stamp per run of unread segments
//! (a segment arriving behind unread bytes is merged into them and the stamp overwritten), so
//! a task that reads late — busy with a thousand other streams — learns only when the *last*
//! of a backlog arrived. The watcher wakes on each arrival (edge-triggered `epoll`) and peeks
//! at the stamp while the new bytes are still the newest: one wake and one system call per
//! arrival, on a thread that does nothing else, so it is on time where the tasks are not.
//! Only sockets awaiting a response's first token are watched (see `Conn::fill`): a couple of
//! wakes per request.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use nix::sys::time::TimeSpec;

/// Stamps kept per watched socket between two reads (a first token comes within a few arrivals
/// of the request); beyond it the newest are dropped, since the oldest is the one a read needs.
const MAX_STAMPS: usize = 16;

/// The kernel stamps a watcher saw on one socket, oldest first.
#[derive(Debug, Default)]
struct Seen {
    /// Set while the socket is registered; cleared (under the lock) before it may close, so the
    /// watcher never peeks at a descriptor that was closed and reused.
    fd: Option<RawFd>,
    stamps: Vec<TimeSpec>,
}

/// One watched socket's stamps, shared by its connection and the watcher.
#[derive(Debug, Default)]
struct Slot(Mutex<Seen>);

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Seen> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the stamps seen so far.
    fn take(&self) -> Vec<TimeSpec> {
        std::mem::take(&mut self.lock().stamps)
    }
}

/// The watcher: its `epoll` set and the slots by registration id.
struct Watcher {
    epoll: Epoll,
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
    next_id: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The process's watcher, started on first use; `None` where it cannot run.
fn watcher() -> Option<&'static Watcher> {
    static WATCHER: OnceLock<Option<&'static Watcher>> = OnceLock::new();
    *WATCHER.get_or_init(|| {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).ok()?;
        let watcher: &'static Watcher = Box::leak(Box::new(Watcher {
            epoll,
            slots: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }));
        std::thread::Builder::new()
            .name("goodput-arrivals".into())
            .spawn(move || watcher.run())
            .ok()?;
        Some(watcher)
    })
}

impl Watcher {
    fn run(&self) {
        let mut events = [EpollEvent::empty(); 64];
        let mut peeker = Peeker {
            control: nix::cmsg_space!(TimeSpec),
        };
        loop {
            let ready = match self.epoll.wait(&mut events, EpollTimeout::NONE) {
                Ok(ready) => ready,
                Err(Errno::EINTR) => continue,
                // Nothing is watched any more: reads keep their last arrival only.
                Err(_) => return,
            };
            for event in &events[..ready] {
                let slot = lock(&self.slots).get(&event.data()).cloned();
                if let Some(slot) = slot {
                    let mut seen = slot.lock();
                    if seen.stamps.len() < MAX_STAMPS
                        && let Some(stamp) = seen.fd.and_then(|fd| peeker.stamp(fd))
                    {
                        seen.stamps.push(stamp);
                    }
                }
            }
        }
    }
}

/// Room for one `SCM_TIMESTAMPNS` control message, reused by every peek.
struct Peeker {
    control: Vec<u8>,
}

impl Peeker {
    /// The receive stamp of the first unread bytes of `fd`, without reading them.
    fn stamp(&mut self, fd: RawFd) -> Option<TimeSpec> {
        let mut byte = [0u8; 1];
        let mut iov = [std::io::IoSliceMut::new(&mut byte)];
        let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
        let message = recvmsg::<()>(fd, &mut iov, Some(&mut self.control), flags).ok()?;
        message.cmsgs().ok()?.find_map(|cmsg| match cmsg {
            ControlMessageOwned::ScmTimestampns(stamp) => Some(stamp),
            _ => None,
        })
    }
}

/// A socket being watched; dropping it (or [`Watch::stop`]) ends the watch.
#[derive(Debug)]
pub(super) struct Watch {
    id: u64,
    slot: Arc<Slot>,
}

impl Watch {
    /// Starts watching `socket` (edge-triggered: each arrival wakes the watcher once); `None`
    /// when the watcher cannot run or refuses it.
    pub(super) fn start<S: AsFd>(socket: &S) -> Option<Watch> {
        let watcher = watcher()?;
        let id = watcher.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot::default());
        slot.lock().fd = Some(socket.as_fd().as_raw_fd());
        lock(&watcher.slots).insert(id, Arc::clone(&slot));
        let flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLET;
        if watcher
            .epoll
            .add(socket, EpollEvent::new(flags, id))
            .is_err()
        {
            lock(&watcher.slots).remove(&id);
            return None;
        }
        Some(Watch { id, slot })
    }

    /// The stamps seen since the last call.
    pub(super) fn take(&self) -> Vec<TimeSpec> {
        self.slot.take()
    }

    /// Ends the watch while `socket` is still open.
    pub(super) fn stop<S: AsFd>(self, socket: &S) {
        if let Some(watcher) = watcher() {
            let _ = watcher.epoll.delete(socket);
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Under the slot's lock, so a peek in progress finishes before the socket may close.
        self.slot.lock().fd = None;
        if let Some(watcher) = watcher() {
            lock(&watcher.slots).remove(&self.id);
        }
    }
}
