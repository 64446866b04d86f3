//! [`FastMap`] and [`FastSet`]: the hash tables of the per-request path.
//!
//! Every call looks something up in a few maps — its connection's in-flight requests, its
//! session's streams, the tool table, the sessions. std's SipHash was a few percent of an
//! echo call on those short keys; foldhash (hashbrown's own default hasher) is much cheaper
//! and, like std's, seeded at random per process, so client-chosen keys such as request ids
//! cannot be aimed at collisions.

use std::collections::{HashMap, HashSet};

/// A `HashMap` with foldhash's randomly seeded hasher.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A `HashSet` with the same hasher.
pub(crate) type FastSet<T> = HashSet<T, foldhash::fast::RandomState>;
