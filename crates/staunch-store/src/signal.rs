//! [`Signal`]: the hints a store sends its subscribers (a cancel, new work, a change, a lost
//! subscription, a session or request ended elsewhere), from [`crate::JobStore::subscribe_signals`].

/// A hint that something changed. Signals can be lost (a dropped LISTEN connection, a lagging
/// receiver, another process on the same SQLite file): workers must keep polling as the
/// backstop and treat signals only as "look now".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// Cancel was requested for this job.
    Cancel(String),
    /// New work may be claimable, or signals may have been missed (sent after every
    /// (re)subscription): poll now.
    Wake,
    /// Job `id` changed (progress, a question, its state) in the process whose owner id is
    /// `by` ([`crate::JobStore::notify_changed`]); subscribers re-read the row. On PostgreSQL it
    /// crosses instances; other stores send none (their changes are seen in-process).
    Changed {
        /// The job that changed.
        id: String,
        /// Owner id of the process that changed it.
        by: String,
    },
    /// The subscription was (re)established after it may have missed signals (PostgreSQL's
    /// LISTEN connection came back): whoever follows jobs re-reads them now. Sent after
    /// the [`Signal::Wake`] of the same reconnection.
    Reconnected,
    /// The HTTP session with this id was deleted (a client's DELETE on some instance): an
    /// instance holding it ends it now. Sent by PostgreSQL's session store only.
    SessionEnded(String),
    /// A client cancelled request `request_id` (its JSON form) of session `session_id` through
    /// an instance that does not run it ([`crate::SessionStore::relay_cancel`]): the instance
    /// that runs it cancels it.
    RequestCancelled {
        /// The `Mcp-Session-Id` of the request's session.
        session_id: String,
        /// The request's JSON-RPC id, as JSON text.
        request_id: String,
        /// The reason the client gave, if any.
        reason: Option<String>,
    },
}
