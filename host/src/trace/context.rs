//! W3C trace context: the ids a span carries, and the `traceparent` text
//! that carries them between processes (an environment variable, an HTTP
//! header, a stored write).

use std::fmt;

/// A trace's id: 16 bytes, never all zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span's id: 8 bytes, never all zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    /// A new random id.
    pub fn random() -> TraceId {
        loop {
            let bytes = (u128::from(random_u64()) << 64 | u128::from(random_u64())).to_be_bytes();
            if bytes != [0; 16] {
                return TraceId(bytes);
            }
        }
    }
}

impl SpanId {
    /// A new random id.
    pub fn random() -> SpanId {
        loop {
            let random = random_u64();
            if random != 0 {
                return SpanId(random.to_be_bytes());
            }
        }
    }
}

/// 64 random bits from a per-thread SplitMix64 seeded by the OS: ids must
/// be unique and uniform (a ratio sampler reads a trace id's low bytes),
/// not secret, and a pass makes several, so a system call each would cost.
fn random_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let mut seed = [0u8; 8];
            if getrandom::fill(&mut seed).is_err() {
                // Unique enough for ids: the clock, with this thread's
                // stack address to tell apart threads seeded together.
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64);
                let here = &seed as *const _ as u64;
                seed = (nanos ^ here.rotate_left(32)).to_le_bytes();
            }
            u64::from_le_bytes(seed)
        });
    }
    STATE.with(|state| {
        let next = state.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        state.set(next);
        let mut z = next;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

impl TraceId {
    /// The id in lower-case hex, as `traceparent` writes it.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpanId({self})")
    }
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    f.write_str(&hex(bytes))
}

/// `bytes` in lower-case hex: every pass's trace id is written this way,
/// so without a formatting call per byte.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    text
}

/// Where a span sits: its trace, its own id, and whether the trace is
/// sampled (recorded and exported) or only propagated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace the span belongs to.
    pub trace_id: TraceId,
    /// The span itself: the parent of the spans made under it.
    pub span_id: SpanId,
    /// The `sampled` flag: whether spans of this trace are exported.
    pub sampled: bool,
}

/// Why a `traceparent` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "traceparent {given:?} is not a W3C trace context ({why}); the form is 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"
)]
pub struct TraceparentError {
    given: String,
    why: &'static str,
}

impl TraceContext {
    /// Reads a `traceparent` header value (W3C Trace Context, version 00;
    /// a later version is read by its first four fields, as the
    /// recommendation asks).
    ///
    /// # Errors
    /// [`TraceparentError`] naming what is wrong: the shape, a character
    /// that is not lower-case hex, an all-zero id, version `ff`.
    pub fn parse(text: &str) -> Result<TraceContext, TraceparentError> {
        let refuse = |why| TraceparentError {
            given: crate::naming::clip(text, 80).to_string(),
            why,
        };
        let text = text.trim();
        let mut fields = text.split('-');
        let (Some(version), Some(trace), Some(span), Some(flags)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(refuse("it has fewer than four fields"));
        };
        let version = hex_bytes::<1>(version).ok_or_else(|| refuse("the version is not 2 hex"))?;
        if version == [0xff] {
            return Err(refuse("version ff is invalid"));
        }
        if version == [0] && fields.next().is_some() {
            return Err(refuse("version 00 has exactly four fields"));
        }
        let trace_id = hex_bytes::<16>(trace)
            .ok_or_else(|| refuse("the trace id is not 32 lower-case hex"))?;
        let span_id =
            hex_bytes::<8>(span).ok_or_else(|| refuse("the parent id is not 16 lower-case hex"))?;
        let [flags] = hex_bytes::<1>(flags).ok_or_else(|| refuse("the flags are not 2 hex"))?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return Err(refuse("an all-zero id is invalid"));
        }
        Ok(TraceContext {
            trace_id: TraceId(trace_id),
            span_id: SpanId(span_id),
            sampled: flags & 1 == 1,
        })
    }

    /// A new trace's root context, sampled or not.
    pub fn new_root(sampled: bool) -> TraceContext {
        TraceContext {
            trace_id: TraceId::random(),
            span_id: SpanId::random(),
            sampled,
        }
    }

    /// The `traceparent` value naming this context as the parent.
    pub fn traceparent(&self) -> String {
        let flags = if self.sampled { "01" } else { "00" };
        format!(
            "00-{}-{}-{flags}",
            hex(&self.trace_id.0),
            hex(&self.span_id.0)
        )
    }
}

/// `text` as exactly `N` bytes of lower-case hex.
fn hex_bytes<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let mut bytes = [0u8; N];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
    }
    Some(bytes)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_reads_and_prints_back_the_same() {
        let context = TraceContext::parse(SAMPLE).unwrap();
        assert!(context.sampled);
        assert_eq!(
            context.trace_id.to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id.to_string(), "00f067aa0ba902b7");
        assert_eq!(context.traceparent(), SAMPLE);
        let unsampled = TraceContext::parse(&SAMPLE.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled);
    }

    #[test]
    fn a_later_version_is_read_by_its_first_four_fields() {
        let later = format!("{}-extra", SAMPLE.replacen("00", "01", 1));
        assert!(TraceContext::parse(&later).is_ok());
    }

    #[test]
    fn malformed_values_are_refused_with_the_reason() {
        for (bad, why) in [
            ("", "fewer than four fields"),
            ("00-abc-def-01", "trace id"),
            (&SAMPLE.replace("4bf9", "4BF9"), "lower-case"),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "all-zero",
            ),
            (&SAMPLE.replacen("00", "ff", 1), "version ff"),
            (&format!("{SAMPLE}-more"), "exactly four"),
        ] {
            let error = TraceContext::parse(bad).unwrap_err().to_string();
            assert!(error.contains(why), "{bad:?}: {error}");
            assert!(error.contains("00-<32 hex trace id>"), "{error}");
        }
    }

    #[test]
    fn random_ids_differ_and_print_as_hex_of_their_length() {
        let (a, b) = (TraceContext::new_root(true), TraceContext::new_root(true));
        assert_ne!(a.trace_id, b.trace_id);
        assert_eq!(a.trace_id.to_string().len(), 32);
        assert_eq!(a.span_id.to_string().len(), 16);
        assert_eq!(TraceContext::parse(&a.traceparent()).unwrap(), a);
    }
}
