//! A plugin that misbehaves on purpose, as its spec's `act` says, so tests can
//! show that the host contains it: `loop` spins forever, `allocate` grows
//! memory without bound, `panic` panics, `bad-result` asks to be requeued in
//! half a billion years, `open-transaction` returns with a transaction open,
//! `read-file` tries to read the host's files, `sleep` waits 600 ms in a
//! host call (longer than its 300 ms deadline, which counts guest time
//! only). Anything else behaves. Its `validate` misbehaves the same way
//! for `validate-loop`, `validate-allocate`, `validate-panic`, and refuses
//! `validate-refuse` (and `validate-escape`, in words holding a terminal
//! escape and a line break).

use std::time::Duration;

use beehive_guest::{Action, ClientOf, Controller, Error, ObjectOf, Registration, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller.
#[derive(Default)]
pub struct Misbehave;

/// What to do.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// The misbehaviour.
    pub act: String,
}

/// What a well-behaved pass reports.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Status {
    /// What happened.
    pub outcome: String,
}

impl Controller for Misbehave {
    type Spec = Spec;
    type Status = Status;

    fn reconcile(&self, client: &ClientOf<'_, Self>, object: &ObjectOf<Self>) -> Result<Action> {
        let outcome = match object.spec.act.as_str() {
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "allocate" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("misbehave was asked to panic"),
            "bad-result" => {
                return Ok(
                    Action::settled().requeue_after(Duration::from_secs(u64::MAX / 1000 - 1))
                );
            }
            "open-transaction" => {
                let _ = client.raw().begin();
                return Ok(Action::settled());
            }
            "sleep" => {
                // Blocked in a host call (WASI's poll) for longer than the
                // deadline, which counts guest time only.
                std::thread::sleep(Duration::from_millis(600));
                "slept in a host call".to_string()
            }
            "read-file" => match std::fs::read_to_string("/etc/hostname") {
                Ok(text) => format!("read the host's file: {text}"),
                Err(error) => return Err(Error::msg(format!("no file access: {error}"))),
            },
            other => format!("behaved ({other})"),
        };
        client.update_status(&Status { outcome })?;
        Ok(Action::settled())
    }

    fn validate(&self, spec: &Spec) -> Vec<beehive_guest::Violation> {
        match spec.act.as_str() {
            "validate-loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "validate-allocate" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "validate-panic" => panic!("misbehave was asked to panic in validate"),
            "validate-refuse" => vec![beehive_guest::Violation::new(
                "spec.act",
                "validate-refuse is refused",
            )],
            // A terminal escape and a forged line in the refusal's text.
            "validate-escape" => vec![beehive_guest::Violation::new(
                "spec.act\u{1b}[2J",
                "\u{1b}[31mred\nerror: forged",
            )],
            _ => Vec::new(),
        }
    }

    fn registration() -> Registration {
        // A short deadline, so the endless loop is cut quickly.
        Registration::new("test.dev", "Misbehave")
            .spec_schema::<Spec>()
            .status_schema::<Status>()
            .validates()
            .pass_deadline(Duration::from_millis(300))
    }
}

beehive_guest::export!(Misbehave);
