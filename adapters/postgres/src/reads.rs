//! Connections of their own for the latest-state read, given back without a round trip.
//!
//! sqlx's pool tests every connection it gets back (`PoolConnection`'s drop spawns a task that
//! sends a `Sync` and waits for PostgreSQL's `ReadyForQuery`): on a read of one statement that is
//! a second round trip, a task and four more system calls across the two processes, for nothing
//! the read needs (decision 124). [`ReadConnections`] keeps a few connections, opened with the
//! pool's own options when first needed, and takes one back only when its statement ran to its
//! end, answer read: the connection is then idle at a message boundary, which is all the ping
//! would have shown. A statement that failed, or whose future was dropped before its answer was
//! read (a client that went away), loses its connection: it is closed, and the next read opens
//! another. A connection that broke while idle (PostgreSQL restarted) fails its next statement,
//! as a pooled one does without the checkout ping (decision 38), and is replaced.

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};
use sqlx::Connection;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Semaphore, SemaphorePermit};

/// How many connections the latest-state read keeps at most, beside the pool's.
pub const READ_CONNECTIONS: usize = 4;

/// A few connections for one-statement reads; see the module's documentation.
pub(crate) struct ReadConnections {
    pool: PgPool,
    options: Arc<PgConnectOptions>,
    idle: Mutex<Vec<PgConnection>>,
    permits: Semaphore,
    /// How long a read waits for one of the connections, opening it included, before it fails,
    /// like the pool's acquire.
    acquire_timeout: Duration,
}

impl ReadConnections {
    /// At most `max` connections to the server and database of `pool`, opened with its options.
    pub(crate) fn new(pool: &PgPool, max: usize, acquire_timeout: Duration) -> Self {
        Self {
            pool: pool.clone(),
            options: pool.connect_options(),
            idle: Mutex::new(Vec::with_capacity(max)),
            permits: Semaphore::new(max),
            acquire_timeout,
        }
    }

    /// A connection: an idle one, or a new one when none is idle and fewer than the bound are
    /// open. Fails as the pool does once the store is closed (`PoolClosed`), and after
    /// its acquire timeout (`PoolTimedOut`), the connecting included: a router whose server is
    /// gone may accept and never answer.
    pub(crate) async fn take(&self) -> Result<Taken<'_>, sqlx::Error> {
        if self.pool.is_closed() {
            return Err(sqlx::Error::PoolClosed);
        }
        let deadline = tokio::time::Instant::now() + self.acquire_timeout;
        let permit = tokio::time::timeout_at(deadline, self.permits.acquire())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let connection = match idle {
            Some(connection) => connection,
            None => tokio::time::timeout_at(deadline, PgConnection::connect_with(&self.options))
                .await
                .map_err(|_| sqlx::Error::PoolTimedOut)??,
        };
        Ok(Taken {
            reads: self,
            connection: Some(connection),
            _permit: permit,
        })
    }

    /// Closes the idle connections (the store is closing); one taken now is closed when its read
    /// ends, and no read takes one any more.
    pub(crate) async fn close(&self) {
        self.permits.close();
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        for connection in idle {
            let _ = connection.close().await;
        }
    }
}

/// A connection taken out of [`ReadConnections`]: [`Taken::give_back`] after its statement's
/// answer was read; dropped otherwise, it is closed.
pub(crate) struct Taken<'a> {
    reads: &'a ReadConnections,
    connection: Option<PgConnection>,
    _permit: SemaphorePermit<'a>,
}

impl Taken<'_> {
    /// The connection, to run one statement on.
    pub(crate) fn connection(&mut self) -> &mut PgConnection {
        self.connection
            .as_mut()
            .expect("a taken connection is held until it is given back")
    }

    /// Puts the connection back for the next read: only after a statement that succeeded, its
    /// answer read to the end.
    pub(crate) fn give_back(mut self) {
        if let Some(connection) = self.connection.take() {
            if !self.reads.permits.is_closed() {
                self.reads
                    .idle
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(connection);
            }
        }
    }
}
