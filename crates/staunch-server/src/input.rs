//! Input-required rounds (the stateless era's MRTR, SEP-2322): how a handler asks the client
//! for input — elicitation, sampling, roots — without a server→client request.
//!
//! In the session era [`crate::Context::elicit`] and friends send a request to the client on
//! the open stream and wait. In the stateless era there is no such stream: the handler's first
//! unanswered question ends the round. The request is answered with
//! `{resultType: "input_required", inputRequests: {key: {method, params}}, requestState}`, and
//! the client retries the *same* request with `inputResponses: {key: answer}` and the state
//! echoed. The handler then runs again from the start; its questions are answered from what the
//! client sent (this round) and from the sealed state (earlier rounds), in the same order, so it
//! gets further each round. Side effects a handler performs before its last question run once
//! per round: a handler must ask first and act after (the README says so).
//!
//! `requestState` is sealed — encrypted and authenticated with XChaCha20-Poly1305 under a key
//! derived from one the server gets from its store — so any instance sharing the store can
//! continue a round, nobody who holds the state can read the earlier answers in it, and a
//! client can neither forge answers into it nor move it to another request (it is bound to the
//! method, the tool or prompt name and the arguments) or to another caller (with auth, the
//! principal is part of the authenticated data: another principal's replay does not open). A
//! tampered, foreign or expired state is -32602.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::Sha256;
use staunch_protocol::ErrorObject;

use crate::codec;
use crate::fingerprint::Fingerprint;

/// How long a `requestState` stays valid: a person answering an elicitation takes minutes, not
/// hours.
const STATE_MAX_AGE_MS: i64 = 60 * 60 * 1000;

/// The name under which the store keeps the shared [`StateKey`].
const STATE_KEY_NAME: &str = "input-state-key";

/// The key that seals `requestState`. Any instance with the same key can continue a round.
#[derive(Clone)]
pub struct StateKey(Vec<u8>);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

impl StateKey {
    /// A key from stored bytes (at least 32).
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// The key as hex, to store it where other instances read it.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A key from [`StateKey::to_hex`]'s form; `None` unless it is at least 32 bytes of hex.
    pub fn from_hex(hex: &str) -> Option<Self> {
        if hex.len() < 64 || !hex.len().is_multiple_of(2) {
            return None;
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some(Self(bytes))
    }

    /// The key of every instance sharing `sessions`' store (and of this one after a restart):
    /// the first to ask stores a random one, everyone gets the stored one. A stored value
    /// that is not a key is [`staunch_store::StoreError::InvalidInput`].
    pub async fn shared(
        sessions: &dyn staunch_store::SessionStore,
    ) -> Result<Self, staunch_store::StoreError> {
        let candidate = Self::random().to_hex();
        let stored = sessions
            .shared_secret(STATE_KEY_NAME, &candidate, staunch_store::now_ms())
            .await?;
        Self::from_hex(&stored).ok_or_else(|| {
            staunch_store::StoreError::InvalidInput(format!(
                "the stored {STATE_KEY_NAME} is not 32 or more bytes of hex"
            ))
        })
    }

    /// A fresh random key (for a single instance; rounds do not survive a restart).
    pub fn random() -> Self {
        let mut b = vec![0u8; 32];
        if getrandom::fill(&mut b).is_err() {
            panic!("the operating system's random number generator failed");
        }
        Self(b)
    }

    /// The cipher of `requestState`: its key derived from this one (HMAC-SHA256 of a fixed
    /// label), so the stored key is never used directly as a cipher key.
    fn cipher(&self) -> XChaCha20Poly1305 {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        m.update(b"staunch requestState cipher v2");
        let derived = m.finalize().into_bytes();
        <XChaCha20Poly1305 as KeyInit>::new_from_slice(&derived)
            .unwrap_or_else(|_| unreachable!("HMAC-SHA256 gives the 32 bytes the cipher takes"))
    }
}

/// The prefix of a sealed state of this format.
const SEALED_PREFIX: &str = "v2.";

/// What the sealed state carries between rounds.
#[derive(Serialize, Deserialize)]
struct SealedState {
    /// Format version.
    v: u32,
    /// What the state is bound to: method, tool/prompt name, argument fingerprint.
    m: String,
    n: String,
    f: String,
    /// Rounds answered so far.
    r: u32,
    /// Every answer so far, by key.
    a: Map<String, Value>,
    /// When sealed (ms since the epoch).
    t: i64,
}

/// What a request is bound to, so its state cannot be replayed into another one.
#[derive(Clone, Debug)]
pub(crate) struct Binding {
    /// One of the methods that have rounds (a name, not a copy per request).
    pub(crate) method: &'static str,
    /// The tool, prompt or resource (shared with the request's other records: no copy).
    pub(crate) name: Arc<str>,
    pub(crate) fingerprint: Fingerprint,
    /// Who asked: the authenticated principal (`None` without auth, where callers cannot be
    /// told apart). A state opens only for the same caller.
    pub(crate) caller: Option<Arc<str>>,
}

impl Binding {
    /// The data the seal authenticates besides the state: the caller.
    fn aad(&self) -> Vec<u8> {
        let mut aad = b"staunch requestState caller:".to_vec();
        if let Some(c) = &self.caller {
            aad.push(b'+');
            aad.extend_from_slice(c.as_bytes());
        }
        aad
    }
}

/// The input-required rounds of one stateless request.
pub(crate) struct Rounds {
    binding: Binding,
    /// Answers from earlier rounds (sealed state) and this one (`inputResponses`).
    answers: Map<String, Value>,
    /// Rounds answered before this one.
    round: u32,
    /// Questions asked this round that have no answer yet, in order.
    asked: Mutex<Vec<(String, Value)>>,
    /// For generated keys: the n-th question of a kind gets the same key every round.
    counter: AtomicU32,
}

impl Rounds {
    /// The rounds of a request whose params may carry `inputResponses` and `requestState`.
    pub(crate) fn from_params(
        key: &StateKey,
        binding: Binding,
        params: Option<&Value>,
        now_ms: i64,
    ) -> Result<Self, ErrorObject> {
        let mut answers = Map::new();
        let mut round = 0;
        if let Some(state) = params.and_then(|p| p.get("requestState")) {
            let Value::String(sealed) = state else {
                return Err(ErrorObject::invalid_params("requestState must be a string"));
            };
            let st = open(key, sealed, &binding.aad())?;
            if st.m != binding.method
                || *st.n != *binding.name
                || st.f != binding.fingerprint.as_str()
            {
                return Err(ErrorObject::invalid_params(
                    "requestState belongs to another request (method, name or arguments \
                     differ): retry without it",
                ));
            }
            if now_ms.saturating_sub(st.t) > STATE_MAX_AGE_MS {
                return Err(ErrorObject::invalid_params(
                    "requestState has expired: retry without it",
                ));
            }
            answers = st.a;
            round = st.r;
        }
        match params.and_then(|p| p.get("inputResponses")) {
            None => {}
            Some(Value::Object(responses)) => {
                for (k, v) in responses {
                    if !v.is_object() {
                        return Err(ErrorObject::invalid_params(format!(
                            "inputResponses[{k:?}] must be an object (the answer to the input \
                             request with that key)"
                        )));
                    }
                    answers.insert(k.clone(), v.clone());
                }
                if !responses.is_empty() {
                    round += 1;
                }
            }
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "inputResponses must be an object mapping input request keys to answers",
                ));
            }
        }
        Ok(Self {
            binding,
            answers,
            round,
            asked: Mutex::new(Vec::new()),
            counter: AtomicU32::new(0),
        })
    }

    /// Rounds the client has answered so far (0 on the first call).
    pub(crate) fn round(&self) -> u32 {
        self.round
    }

    /// The keys the client has answered so far: this round's `inputResponses` and the
    /// earlier rounds' in the sealed state.
    pub(crate) fn answered_keys(&self) -> impl Iterator<Item = &str> {
        self.answers.keys().map(String::as_str)
    }

    /// A key for an unnamed question of `kind`: the same on every round for the same call order.
    pub(crate) fn next_key(&self, kind: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{kind}-{n}")
    }

    /// The answer to `key`, or records the question (`{method, params}`) for this round.
    pub(crate) fn answer_or_ask(&self, key: &str, method: &str, params: &Value) -> Option<Value> {
        if let Some(a) = self.answers.get(key) {
            return Some(a.clone());
        }
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        if !asked.iter().any(|(k, _)| k == key) {
            asked.push((key.to_string(), json!({"method": method, "params": params})));
        }
        None
    }

    /// Whether the handler asked something this round that the client has not answered.
    pub(crate) fn pending(&self) -> bool {
        !self
            .asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// The `InputRequiredResult` for this round: the open questions and the sealed state.
    pub(crate) fn input_required(&self, key: &StateKey, now_ms: i64) -> Value {
        let asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        let mut requests = Map::new();
        for (k, q) in asked.iter() {
            requests.insert(k.clone(), q.clone());
        }
        let st = SealedState {
            v: 1,
            m: self.binding.method.to_owned(),
            n: self.binding.name.to_string(),
            f: self.binding.fingerprint.as_str().to_owned(),
            r: self.round,
            a: self.answers.clone(),
            t: now_ms,
        };
        codec::input_required(requests, seal(key, &st, &self.binding.aad()))
    }
}

/// `v2.` and the base64url of a fresh 24-byte nonce followed by the ciphertext and its tag.
fn seal(key: &StateKey, st: &SealedState, aad: &[u8]) -> String {
    let mut nonce = [0u8; 24];
    if getrandom::fill(&mut nonce).is_err() {
        panic!("the operating system's random number generator failed");
    }
    let plain = serde_json::to_vec(st).unwrap_or_default();
    let sealed = key
        .cipher()
        .encrypt(&XNonce::from(nonce), Payload { msg: &plain, aad })
        .unwrap_or_else(|_| unreachable!("a state is far below the cipher's length limit"));
    let mut out = nonce.to_vec();
    out.extend_from_slice(&sealed);
    format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(out))
}

fn open(key: &StateKey, sealed: &str, aad: &[u8]) -> Result<SealedState, ErrorObject> {
    let refused = || {
        ErrorObject::invalid_params(
            "requestState does not open for this request (it was changed, sealed by another \
             server, or issued to another caller): retry without it",
        )
    };
    let body = sealed.strip_prefix(SEALED_PREFIX).ok_or_else(refused)?;
    let bytes = URL_SAFE_NO_PAD.decode(body).map_err(|_| refused())?;
    if bytes.len() < 24 {
        return Err(refused());
    }
    let (nonce, msg) = bytes.split_at(24);
    let nonce: [u8; 24] = nonce.try_into().map_err(|_| refused())?;
    let plain = key
        .cipher()
        .decrypt(&XNonce::from(nonce), Payload { msg, aad })
        .map_err(|_| refused())?;
    serde_json::from_slice(&plain).map_err(|_| refused())
}

/// The client capability a server→client method needs.
pub(crate) fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Keeps only answers whose keys a handler may still ask (for tests and logs).
#[cfg(test)]
fn answer_keys(r: &Rounds) -> Vec<String> {
    let mut k: Vec<String> = r.answers.keys().cloned().collect();
    k.sort();
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_through_hex_and_short_or_bad_hex_is_refused() {
        let k = StateKey::random();
        let back = StateKey::from_hex(&k.to_hex()).expect("valid hex");
        assert_eq!(back.0, k.0);
        assert!(StateKey::from_hex("abcd").is_none(), "too short");
        assert!(StateKey::from_hex(&"zz".repeat(32)).is_none(), "not hex");
        assert!(StateKey::from_hex(&"a".repeat(65)).is_none(), "odd length");
    }

    fn binding() -> Binding {
        Binding {
            method: "tools/call",
            name: "ask".into(),
            fingerprint: Fingerprint::of(&json!("abc")),
            caller: None,
        }
    }

    fn ask_once(r: &Rounds) -> Option<Value> {
        r.answer_or_ask("name", "elicitation/create", &json!({"message": "name?"}))
    }

    #[test]
    fn a_round_trip_carries_the_answers_forward() {
        let key = StateKey::random();
        let r1 = Rounds::from_params(&key, binding(), None, 1_000).unwrap();
        assert_eq!(r1.round(), 0);
        assert!(ask_once(&r1).is_none());
        assert!(r1.pending());
        let out = r1.input_required(&key, 1_000);
        assert_eq!(out["resultType"], "input_required");
        assert_eq!(out["inputRequests"]["name"]["method"], "elicitation/create");
        let state = out["requestState"].clone();

        let retry = json!({
            "requestState": state,
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}
        });
        let r2 = Rounds::from_params(&key, binding(), Some(&retry), 2_000).unwrap();
        assert_eq!(r2.round(), 1);
        assert_eq!(ask_once(&r2).unwrap()["content"]["name"], "Ada");
        // A second question: the first answer travels on in the next state.
        assert!(
            r2.answer_or_ask("color", "elicitation/create", &json!({}))
                .is_none()
        );
        let out2 = r2.input_required(&key, 2_000);
        let retry2 = json!({
            "requestState": out2["requestState"],
            "inputResponses": {"color": {"action": "accept", "content": {"color": "red"}}}
        });
        let r3 = Rounds::from_params(&key, binding(), Some(&retry2), 3_000).unwrap();
        assert_eq!(answer_keys(&r3), ["color", "name"]);
        assert_eq!(r3.round(), 2);
    }

    #[test]
    fn tampered_foreign_and_expired_states_are_refused() {
        let key = StateKey::random();
        let r = Rounds::from_params(&key, binding(), None, 0).unwrap();
        ask_once(&r);
        let state = r.input_required(&key, 0)["requestState"]
            .as_str()
            .unwrap()
            .to_string();
        let with = |s: &str| json!({"requestState": s});
        for bad in [
            format!("{state}-TAMPERED"),
            format!("x{state}"),
            "no-dot".to_string(),
            String::new(),
        ] {
            let e = Rounds::from_params(&key, binding(), Some(&with(&bad)), 1)
                .err()
                .expect("refused");
            assert_eq!(e.code, -32602, "{bad}");
        }
        // Sealed by another server.
        let other = StateKey::random();
        assert!(Rounds::from_params(&other, binding(), Some(&with(&state)), 1).is_err());
        // Bound to another tool.
        let mut b = binding();
        b.name = "other".into();
        assert!(Rounds::from_params(&key, b, Some(&with(&state)), 1).is_err());
        // Too old.
        assert!(
            Rounds::from_params(&key, binding(), Some(&with(&state)), STATE_MAX_AGE_MS + 1)
                .is_err()
        );
        // Issued to no principal (or another one): another caller's replay does not open.
        let mut b = binding();
        b.caller = Some("mallory".into());
        assert!(Rounds::from_params(&key, b, Some(&with(&state)), 1).is_err());
        // Still fine within its age.
        assert!(Rounds::from_params(&key, binding(), Some(&with(&state)), 10).is_ok());
    }

    #[test]
    fn a_state_is_bound_to_its_caller_and_its_answers_are_not_readable() {
        let key = StateKey::random();
        let alice = || Binding {
            caller: Some("alice".into()),
            ..binding()
        };
        let answer = json!({"action": "accept", "content": {"name": "who likes teal"}});
        let r1 = Rounds::from_params(&key, alice(), None, 0).unwrap();
        ask_once(&r1);
        let s1 = r1.input_required(&key, 0)["requestState"].clone();
        let retry = json!({"requestState": s1, "inputResponses": {"name": answer}});
        let r2 = Rounds::from_params(&key, alice(), Some(&retry), 1).unwrap();
        r2.answer_or_ask("color", "elicitation/create", &json!({}));
        let s2 = r2.input_required(&key, 1)["requestState"]
            .as_str()
            .unwrap()
            .to_string();
        // Nothing of the answer shows in the state, in any decoding.
        let raw = URL_SAFE_NO_PAD
            .decode(s2.strip_prefix(SEALED_PREFIX).unwrap())
            .unwrap();
        assert!(!String::from_utf8_lossy(&raw).contains("teal"));
        assert!(!s2.contains("teal"));
        // Bob replays it: refused. Alice: it opens with her answer.
        let bob = Binding {
            caller: Some("bob".into()),
            ..binding()
        };
        let replay = json!({"requestState": s2});
        assert!(Rounds::from_params(&key, bob, Some(&replay), 2).is_err());
        let back = Rounds::from_params(&key, alice(), Some(&replay), 2).unwrap();
        assert_eq!(ask_once(&back).unwrap(), answer);
    }

    #[test]
    fn malformed_input_responses_are_refused_and_extra_keys_ignored() {
        let key = StateKey::random();
        for bad in [
            json!({"inputResponses": null}),
            json!({"inputResponses": [1]}),
            json!({"inputResponses": {"name": 12345}}),
            json!({"requestState": 5}),
        ] {
            assert!(
                Rounds::from_params(&key, binding(), Some(&bad), 0).is_err(),
                "{bad}"
            );
        }
        let extra = json!({"inputResponses": {
            "name": {"action": "accept", "content": {}},
            "unexpected": {"action": "accept"}
        }});
        let r = Rounds::from_params(&key, binding(), Some(&extra), 0).unwrap();
        assert!(ask_once(&r).is_some());
        assert!(!r.pending());
    }

    #[test]
    fn generated_keys_repeat_in_call_order() {
        let key = StateKey::random();
        let a = Rounds::from_params(&key, binding(), None, 0).unwrap();
        let b = Rounds::from_params(&key, binding(), None, 0).unwrap();
        assert_eq!(a.next_key("elicitation"), b.next_key("elicitation"));
        assert_eq!(a.next_key("elicitation"), "elicitation-2");
    }
}
