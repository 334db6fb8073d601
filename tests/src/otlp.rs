//! What an OTLP collector would read from the host's trace exports: the
//! protobuf requests a [`TestServer`](crate::TestServer) received on
//! `/v1/traces`, decoded by a reader of the wire format written for the
//! tests, apart from the host's encoder.

/// One span as the collector received it.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    /// The `service.name` of the resource it came under.
    pub service: String,
    /// Hex, as a `traceparent` writes it.
    pub trace_id: String,
    pub span_id: String,
    pub parent: Option<String>,
    pub name: String,
    /// 1 internal, 3 client.
    pub kind: u64,
    /// Every value as text.
    pub attributes: Vec<(String, String)>,
    /// `(trace id, span id)` of each link.
    pub links: Vec<(String, String)>,
    /// The status message of a failed span.
    pub error: Option<String>,
    /// When it began and ended, in nanoseconds since 1970.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The W3C sampled flag of its `flags` field.
    pub sampled: bool,
}

impl ReceivedSpan {
    /// The value of attribute `key`, if set.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Every span in `bodies` (OTLP `ExportTraceServiceRequest`s), in order.
///
/// # Panics
/// When a body is not a well-formed request.
pub fn decode_spans(bodies: &[Vec<u8>]) -> Vec<ReceivedSpan> {
    let mut spans = Vec::new();
    for body in bodies {
        for resource_spans in messages(body, 1) {
            let service = messages(&resource_spans, 1)
                .iter()
                .flat_map(|resource| attributes(resource, 1))
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v)
                .unwrap_or_default();
            for scope_spans in messages(&resource_spans, 2) {
                for span in messages(&scope_spans, 2) {
                    spans.push(decode_span(&span, &service));
                }
            }
        }
    }
    spans
}

fn decode_span(span: &[u8], service: &str) -> ReceivedSpan {
    let span_fields = fields(span);
    let bytes_of = |number| {
        span_fields.iter().find_map(|(n, f)| match f {
            Field::Bytes(b) if *n == number => Some(hex(b)),
            _ => None,
        })
    };
    let status = messages(span, 15).into_iter().next();
    ReceivedSpan {
        service: service.to_string(),
        trace_id: bytes_of(1).expect("a span has a trace id"),
        span_id: bytes_of(2).expect("a span has an id"),
        parent: bytes_of(4),
        name: text(span, 5).unwrap_or_default(),
        kind: span_fields
            .iter()
            .find_map(|(n, f)| match f {
                Field::Varint(v) if *n == 6 => Some(*v),
                _ => None,
            })
            .unwrap_or(0),
        attributes: attributes(span, 9),
        links: messages(span, 13)
            .iter()
            .map(|link| {
                let f = fields(link);
                let id = |number| {
                    f.iter()
                        .find_map(|(n, v)| match v {
                            Field::Bytes(b) if *n == number => Some(hex(b)),
                            _ => None,
                        })
                        .unwrap_or_default()
                };
                (id(1), id(2))
            })
            .collect(),
        error: status.and_then(|s| text(&s, 2)),
        start_ns: fixed64_at(&span_fields, 7),
        end_ns: fixed64_at(&span_fields, 8),
        sampled: span_fields
            .iter()
            .any(|(n, f)| matches!(f, Field::Fixed32(flags) if *n == 16 && flags & 1 == 1)),
    }
}

fn fixed64_at(fields: &[(u32, Field<'_>)], number: u32) -> u64 {
    fields
        .iter()
        .find_map(|(n, f)| match f {
            Field::Fixed64(v) if *n == number => Some(*v),
            _ => None,
        })
        .unwrap_or(0)
}

/// The key-value pairs at field `number`, values as text.
fn attributes(message: &[u8], number: u32) -> Vec<(String, String)> {
    messages(message, number)
        .iter()
        .map(|kv| {
            let key = text(kv, 1).unwrap_or_default();
            let value = messages(kv, 2)
                .first()
                .map(|any| {
                    fields(any)
                        .into_iter()
                        .map(|(n, f)| match (n, f) {
                            (1, Field::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                            (3, Field::Varint(v)) => (v as i64).to_string(),
                            (_, other) => format!("{other:?}"),
                        })
                        .next()
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            (key, value)
        })
        .collect()
}

fn text(message: &[u8], number: u32) -> Option<String> {
    fields(message).into_iter().find_map(|(n, f)| match f {
        Field::Bytes(b) if n == number => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    })
}

fn messages(message: &[u8], number: u32) -> Vec<Vec<u8>> {
    fields(message)
        .into_iter()
        .filter_map(|(n, f)| match f {
            Field::Bytes(b) if n == number => Some(b.to_vec()),
            _ => None,
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug)]
enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// The fields of one message, in order.
fn fields(mut buf: &[u8]) -> Vec<(u32, Field<'_>)> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf);
        let (number, wire) = ((key >> 3) as u32, key & 7);
        let field = match wire {
            0 => Field::Varint(varint(&mut buf)),
            1 => {
                let (value, rest) = buf.split_at(8);
                buf = rest;
                Field::Fixed64(u64::from_le_bytes(value.try_into().unwrap()))
            }
            2 => {
                let length = varint(&mut buf) as usize;
                let (value, rest) = buf.split_at(length);
                buf = rest;
                Field::Bytes(value)
            }
            5 => {
                let (value, rest) = buf.split_at(4);
                buf = rest;
                Field::Fixed32(u32::from_le_bytes(value.try_into().unwrap()))
            }
            other => panic!("wire type {other} is not in an OTLP request"),
        };
        out.push((number, field));
    }
    out
}

fn varint(buf: &mut &[u8]) -> u64 {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (byte, rest) = buf.split_first().expect("a varint ends");
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    value
}
