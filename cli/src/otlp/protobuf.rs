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

/// One request carrying `spans`, all under one resource.
pub fn export_request(resource: &[(String, String)], spans: &[FinishedSpan]) -> Vec<u8> {
    let mut resource_message = Vec::new();
    for (key, value) in resource {
        message(
            &mut resource_message,
            1,
            &key_value(key, &AttributeValue::Text(value.clone())),
        );
    }
    let mut scope = Vec::new();
    string(&mut scope, 1, SCOPE);
    string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
    let mut scope_spans = Vec::new();
    message(&mut scope_spans, 1, &scope);
    for span in spans {
        message(&mut scope_spans, 2, &encode_span(span));
    }
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &resource_message);
    message(&mut resource_spans, 2, &scope_spans);
    let mut request = Vec::new();
    message(&mut request, 1, &resource_spans);
    request
}

fn encode_span(span: &FinishedSpan) -> Vec<u8> {
    let mut out = Vec::new();
    bytes(&mut out, 1, &span.context.trace_id.0);
    bytes(&mut out, 2, &span.context.span_id.0);
    if let Some(parent) = span.parent {
        bytes(&mut out, 4, &parent.0);
    }
    string(&mut out, 5, &span.name);
    let kind = match span.kind {
        SpanKind::Internal => 1,
        SpanKind::Client => 3,
    };
    varint_field(&mut out, 6, kind);
    fixed64(&mut out, 7, unix_nanos(span.start));
    fixed64(&mut out, 8, unix_nanos(span.end));
    for (key, value) in &span.attributes {
        message(&mut out, 9, &key_value(key, value));
    }
    for link in &span.links {
        message(&mut out, 13, &encode_link(link));
    }
    if let SpanStatus::Error(why) = &span.status {
        let mut status = Vec::new();
        string(&mut status, 2, why);
        varint_field(&mut status, 3, 2); // STATUS_CODE_ERROR
        message(&mut out, 15, &status);
    }
    // The W3C flags: sampled.
    fixed32(&mut out, 16, u32::from(span.context.sampled));
    out
}

fn encode_link(link: &TraceContext) -> Vec<u8> {
    let mut out = Vec::new();
    bytes(&mut out, 1, &link.trace_id.0);
    bytes(&mut out, 2, &link.span_id.0);
    fixed32(&mut out, 6, u32::from(link.sampled));
    out
}

fn key_value(key: &str, value: &AttributeValue) -> Vec<u8> {
    let mut any = Vec::new();
    match value {
        AttributeValue::Text(text) => string(&mut any, 1, text),
        // int_value is an int64: negative numbers take ten bytes.
        AttributeValue::Int(number) => varint_field(&mut any, 3, *number as u64),
    }
    let mut out = Vec::new();
    string(&mut out, 1, key);
    message(&mut out, 2, &any);
    out
}

fn unix_nanos(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
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

fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    tag(out, field, LENGTH_DELIMITED);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn string(out: &mut Vec<u8>, field: u32, value: &str) {
    bytes(out, field, value.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, encoded: &[u8]) {
    bytes(out, field, encoded);
}

#[cfg(test)]
mod tests {
    use super::*;
    use beehive::trace::{SpanId, TraceId};

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
        let encoded = encode_span(&span);
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
