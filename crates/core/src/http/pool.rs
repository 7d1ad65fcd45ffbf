//! The idle-connection pool: a bounded LIFO of open keep-alive connections to one target,
//! each checked (without blocking) to still be open and quiet before it is reused.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::conn::Conn;

struct IdleConn {
    conn: Conn,
    since: Instant,
}

/// Counters of a client's connection use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Connections opened.
    pub opened: u64,
    /// Requests carried by a pooled (kept-alive) connection.
    pub reused: u64,
    /// Idle connections found closed (or expired) and discarded.
    pub discarded: u64,
    /// Connections idle in the pool now.
    pub idle: usize,
}

/// Bounded LIFO pool of idle connections to one target.
pub(super) struct Pool {
    idle: Mutex<VecDeque<IdleConn>>,
    max_idle: usize,
    idle_timeout: Duration,
    reuse_after: Duration,
    pub(super) opened: AtomicU64,
    pub(super) reused: AtomicU64,
    discarded: AtomicU64,
}

impl Pool {
    pub(super) fn new(max_idle: usize, idle_timeout: Duration, reuse_after: Duration) -> Self {
        Pool {
            idle: Mutex::new(VecDeque::new()),
            max_idle,
            idle_timeout,
            reuse_after,
            opened: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<IdleConn>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently used idle connection that is still open, not expired, and idle for at
    /// least `reuse_after` (younger ones stay pooled for later).
    pub(super) fn take(&self) -> Option<Conn> {
        let now = Instant::now();
        let mut dropped = Vec::new();
        let found = {
            let mut idle = self.lock();
            let mut found = None;
            for index in (0..idle.len()).rev() {
                let (closed, idle_for) = {
                    let entry = &mut idle[index];
                    (
                        !entry.conn.is_idle_and_open(),
                        now.duration_since(entry.since),
                    )
                };
                if closed || idle_for > self.idle_timeout {
                    dropped.extend(idle.remove(index));
                } else if idle_for >= self.reuse_after {
                    found = idle.remove(index).map(|entry| entry.conn);
                    break;
                }
            }
            found
        };
        self.note_discarded(dropped.len());
        found
    }

    /// Returns a connection whose response was read to the end.
    pub(super) fn put(&self, mut conn: Conn) {
        if !conn.is_idle_and_open() {
            self.note_discarded(1);
            return;
        }
        let now = Instant::now();
        let mut dropped = Vec::new();
        {
            let mut idle = self.lock();
            while idle
                .front()
                .is_some_and(|conn| now.duration_since(conn.since) > self.idle_timeout)
            {
                dropped.extend(idle.pop_front());
            }
            if idle.len() < self.max_idle {
                idle.push_back(IdleConn { conn, since: now });
            }
        }
        self.note_discarded(dropped.len());
    }

    pub(super) fn note_discarded(&self, count: usize) {
        if count > 0 {
            self.discarded.fetch_add(count as u64, Ordering::Relaxed);
        }
    }

    pub(super) fn stats(&self) -> PoolStats {
        PoolStats {
            opened: self.opened.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            discarded: self.discarded.load(Ordering::Relaxed),
            idle: self.lock().len(),
        }
    }
}
