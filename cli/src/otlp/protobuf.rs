//! The OTLP trace export request (`ExportTraceServiceRequest` of
//! opentelemetry-proto's `collector/trace/v1`), encoded in protobuf's wire
//! format by hand: the few messages and fields it uses are fixed by the
//! stable v1 protocol, and a generator with its runtime would cost the
//! build more than these lines.

use std::time::{SystemTime, UNIX_EPOCH};

use beehive::trace::{AttributeValue, FinishedSpan, SpanKind, SpanStatus, TraceContext};

/// Wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LENGTH_DELIMITED: u8 = 2;
const FIXED32: u8 = 5;

/// The instrumentation scope every span is reported under.
const SCOPE: &str = "beehive";

/// Appends `span` to `spans`, a run of encoded spans that
/// [`export_request`] will send: a span is encoded the moment it is
/// offered, on the thread that finished it, so the queue holds bytes
/// rather than the span's allocations.
pub fn append_span(spans: &mut Vec<u8>, span: &FinishedSpan) {
    let len = span_len(span);
    spans.reserve(field_len(2, len));
    // Field 2 of ScopeSpans: one Span.
    header(spans, 2, len);
    write_span(spans, span);
}

/// One request carrying `spans` (appended by [`append_span`]), all under
/// one resource.
///
/// Every message's length is worked out before it is written, so the
/// request is written once, in place: building each nested message in a
/// buffer of its own and copying it out cost more than a span's pass.
pub fn export_request(resource: &[(String, String)], spans: &[u8]) -> Vec<u8> {
    let resource_len: usize = resource
        .iter()
        .map(|(key, value)| field_len(1, text_kv_len(key, value)))
        .sum();
    let scope_len = field_len(1, SCOPE.len()) + field_len(2, env!("CARGO_PKG_VERSION").len());
    let scope_spans_len = field_len(1, scope_len) + spans.len();
    let resource_spans_len = field_len(1, resource_len) + field_len(2, scope_spans_len);
    let mut out = Vec::with_capacity(field_len(1, resource_spans_len));
    header(&mut out, 1, resource_spans_len);
    header(&mut out, 1, resource_len);
    for (key, value) in resource {
        header(&mut out, 1, text_kv_len(key, value));
        write_key_value(&mut out, key, &Value::Text(value));
    }
    header(&mut out, 2, scope_spans_len);
    header(&mut out, 1, scope_len);
    string(&mut out, 1, SCOPE);
    string(&mut out, 2, env!("CARGO_PKG_VERSION"));
    out.extend_from_slice(spans);
    out
}

/// An attribute's value, borrowed.
enum Value<'a> {
    Text(&'a str),
    Int(i64),
}

impl<'a> From<&'a AttributeValue> for Value<'a> {
    fn from(value: &'a AttributeValue) -> Self {
        match value {
            AttributeValue::Text(text) => Value::Text(text),
            AttributeValue::Static(text) => Value::Text(text),
            AttributeValue::Int(number) => Value::Int(*number),
        }
    }
}

fn kind_number(kind: SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Client => 3,
    }
}

fn span_len(span: &FinishedSpan) -> usize {
    let mut len = field_len(1, 16) + field_len(2, 8);
    if span.parent.is_some() {
        len += field_len(4, 8);
    }
    len += field_len(5, span.name.len());
    len += 1 + varint_len(kind_number(span.kind));
    len += 2 * (1 + 8);
    for (key, value) in &span.attributes {
        len += field_len(9, key_value_len(key, &value.into()));
    }
    for _ in &span.links {
        len += field_len(13, link_len());
    }
    if let SpanStatus::Error(why) = &span.status {
        len += field_len(15, status_len(why));
    }
    len + 2 + 4
}

fn write_span(out: &mut Vec<u8>, span: &FinishedSpan) {
    bytes(out, 1, &span.context.trace_id.0);
    bytes(out, 2, &span.context.span_id.0);
    if let Some(parent) = span.parent {
        bytes(out, 4, &parent.0);
    }
    string(out, 5, &span.name);
    varint_field(out, 6, kind_number(span.kind));
    fixed64(out, 7, unix_nanos(span.start));
    fixed64(out, 8, unix_nanos(span.end));
    for (key, value) in &span.attributes {
        let value = value.into();
        header(out, 9, key_value_len(key, &value));
        write_key_value(out, key, &value);
    }
    for link in &span.links {
        header(out, 13, link_len());
        write_link(out, link);
    }
    if let SpanStatus::Error(why) = &span.status {
        header(out, 15, status_len(why));
        string(out, 2, why);
        varint_field(out, 3, 2); // STATUS_CODE_ERROR
    }
    // The W3C flags: sampled.
    fixed32(out, 16, u32::from(span.context.sampled));
}

fn status_len(why: &str) -> usize {
    field_len(2, why.len()) + 2
}

fn link_len() -> usize {
    field_len(1, 16) + field_len(2, 8) + 1 + 4
}

fn write_link(out: &mut Vec<u8>, link: &TraceContext) {
    bytes(out, 1, &link.trace_id.0);
    bytes(out, 2, &link.span_id.0);
    fixed32(out, 6, u32::from(link.sampled));
}

fn any_len(value: &Value<'_>) -> usize {
    match value {
        Value::Text(text) => field_len(1, text.len()),
        // int_value is an int64: negative numbers take ten bytes.
        Value::Int(number) => 1 + varint_len(*number as u64),
    }
}

fn key_value_len(key: &str, value: &Value<'_>) -> usize {
    field_len(1, key.len()) + field_len(2, any_len(value))
}

fn text_kv_len(key: &str, value: &str) -> usize {
    key_value_len(key, &Value::Text(value))
}

fn write_key_value(out: &mut Vec<u8>, key: &str, value: &Value<'_>) {
    string(out, 1, key);
    header(out, 2, any_len(value));
    match value {
        Value::Text(text) => string(out, 1, text),
        Value::Int(number) => varint_field(out, 3, *number as u64),
    }
}

fn unix_nanos(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// The bytes a length-delimited field of `payload` bytes takes.
fn field_len(field: u32, payload: usize) -> usize {
    varint_len(u64::from(field) << 3) + varint_len(payload as u64) + payload
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u32, value: u64) {
    tag(out, field, VARINT);
    varint(out, value);
}

fn fixed64(out: &mut Vec<u8>, field: u32, value: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&value.to_le_bytes());
}

fn fixed32(out: &mut Vec<u8>, field: u32, value: u32) {
    tag(out, field, FIXED32);
    out.extend_from_slice(&value.to_le_bytes());
}

/// The head of a length-delimited field whose `len` bytes follow.
fn header(out: &mut Vec<u8>, field: u32, len: usize) {
    tag(out, field, LENGTH_DELIMITED);
    varint(out, len as u64);
}

fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    header(out, field, value.len());
    out.extend_from_slice(value);
}

fn string(out: &mut Vec<u8>, field: u32, value: &str) {
    bytes(out, field, value.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use beehive::trace::{SpanId, TraceId};

    #[test]
    fn every_length_worked_out_is_the_length_written() {
        let span = FinishedSpan {
            context: TraceContext {
                trace_id: TraceId([7; 16]),
                span_id: SpanId([8; 8]),
                sampled: true,
            },
            parent: None,
            name: "GET".into(),
            kind: SpanKind::Client,
            start: SystemTime::now(),
            end: SystemTime::now(),
            attributes: vec![
                ("a", AttributeValue::Int(-1)),
                ("b", AttributeValue::from("x".repeat(300))),
            ],
            links: vec![TraceContext::new_root(true); 2],
            status: SpanStatus::Error("refused".into()),
        };
        let mut written = Vec::new();
        write_span(&mut written, &span);
        assert_eq!(written.len(), span_len(&span));
        let resource = [("service.name".to_string(), "beehive".to_string())];
        let mut spans = Vec::new();
        append_span(&mut spans, &span);
        append_span(&mut spans, &span);
        let request = export_request(&resource, &spans);
        // The outer field's length covers exactly the rest.
        let mut rest = &request[1..];
        let mut declared = 0u64;
        for shift in (0..).step_by(7) {
            let (byte, after) = rest.split_first().unwrap();
            rest = after;
            declared |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
        }
        assert_eq!(declared as usize, rest.len());
        for value in [0, 1, 127, 128, 16_383, 16_384, u64::MAX] {
            let mut out = Vec::new();
            varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value), "{value}");
        }
    }

    #[test]
    fn varints_take_seven_bits_a_byte() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        out.clear();
        varint(&mut out, u64::MAX);
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn a_span_encodes_its_ids_names_and_times_at_their_field_numbers() {
        let span = FinishedSpan {
            context: TraceContext {
                trace_id: TraceId([1; 16]),
                span_id: SpanId([2; 8]),
                sampled: true,
            },
            parent: Some(SpanId([3; 8])),
            name: "reconcile".into(),
            kind: SpanKind::Internal,
            start: UNIX_EPOCH + std::time::Duration::from_nanos(5),
            end: UNIX_EPOCH + std::time::Duration::from_nanos(9),
            attributes: vec![("beehive.generation", AttributeValue::Int(2))],
            links: Vec::new(),
            status: SpanStatus::Unset,
        };
        let mut encoded = Vec::new();
        write_span(&mut encoded, &span);
        assert_eq!(
            encoded.len(),
            span_len(&span),
            "the length worked out is the length written"
        );
        let mut expected = vec![0x0a, 16];
        expected.extend([1; 16]);
        expected.extend([0x12, 8]);
        expected.extend([2; 8]);
        expected.extend([0x22, 8]);
        expected.extend([3; 8]);
        expected.extend([0x2a, 9]);
        expected.extend(b"reconcile");
        expected.extend([0x30, 1]);
        expected.push(0x39);
        expected.extend(5u64.to_le_bytes());
        expected.push(0x41);
        expected.extend(9u64.to_le_bytes());
        // attributes: key "beehive.generation" (18 bytes), value {int_value: 2}
        expected.extend([0x4a, 24, 0x0a, 18]);
        expected.extend(b"beehive.generation");
        expected.extend([0x12, 2, 0x18, 2]);
        expected.push(0x85);
        expected.push(0x01);
        expected.extend(1u32.to_le_bytes());
        assert_eq!(encoded, expected);
    }
}
