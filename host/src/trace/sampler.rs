//! Which traces are recorded: OpenTelemetry's standard samplers, named as
//! `OTEL_TRACES_SAMPLER` names them.

use crate::trace::context::{TraceContext, TraceId};

/// How a trace with no parent is sampled.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Root {
    On,
    Off,
    /// This fraction of traces, chosen by the trace id (so every process
    /// that sees the id decides alike).
    Ratio(f64),
}

/// Decides whether a new span's trace is recorded and exported. A span
/// that is not sampled still carries its context (its HTTP requests still
/// name it), with the `sampled` flag clear.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampler {
    root: Root,
    /// Whether a span with a parent follows the parent's `sampled` flag.
    parent_based: bool,
}

/// Why a sampler's name or argument was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplerError {
    /// The name is none of the standard ones.
    #[error(
        "unknown trace sampler {0:?}: use always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
    )]
    UnknownName(String),
    /// The ratio is not a number from 0 to 1.
    #[error("trace sampler ratio {0:?} is not a number from 0 to 1 (OTEL_TRACES_SAMPLER_ARG)")]
    BadRatio(String),
}

impl Default for Sampler {
    /// `parentbased_always_on`, OpenTelemetry's default.
    fn default() -> Self {
        Sampler {
            root: Root::On,
            parent_based: true,
        }
    }
}

impl Sampler {
    /// The sampler `OTEL_TRACES_SAMPLER=name` and `OTEL_TRACES_SAMPLER_ARG=arg`
    /// name. The ratio samplers take a number from 0 to 1 (1 when absent).
    ///
    /// # Errors
    /// [`SamplerError`] for an unknown name or a ratio out of range.
    pub fn from_name(name: &str, arg: Option<&str>) -> Result<Sampler, SamplerError> {
        let ratio = || -> Result<Root, SamplerError> {
            let Some(arg) = arg else {
                return Ok(Root::Ratio(1.0));
            };
            match arg.trim().parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(Root::Ratio(r)),
                _ => Err(SamplerError::BadRatio(arg.to_string())),
            }
        };
        let (root, parent_based) = match name.trim() {
            "always_on" => (Root::On, false),
            "always_off" => (Root::Off, false),
            "traceidratio" => (ratio()?, false),
            "parentbased_always_on" => (Root::On, true),
            "parentbased_always_off" => (Root::Off, true),
            "parentbased_traceidratio" => (ratio()?, true),
            other => return Err(SamplerError::UnknownName(other.to_string())),
        };
        Ok(Sampler { root, parent_based })
    }

    /// Whether a span of `trace_id` under `parent` (if any) is sampled.
    pub fn samples(&self, trace_id: TraceId, parent: Option<&TraceContext>) -> bool {
        match parent {
            Some(parent) if self.parent_based => parent.sampled,
            _ => match self.root {
                Root::On => true,
                Root::Off => false,
                Root::Ratio(ratio) => by_ratio(trace_id, ratio),
            },
        }
    }
}

/// The trace id's low 8 bytes against the ratio, as OpenTelemetry's SDKs
/// compare them, so a trace is sampled alike wherever it is decided.
fn by_ratio(trace_id: TraceId, ratio: f64) -> bool {
    let low = u64::from_be_bytes(trace_id.0[8..].try_into().unwrap_or([0; 8]));
    let bound = (ratio * (1u64 << 63) as f64) as u64;
    (low >> 1) < bound
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(sampled: bool) -> TraceContext {
        TraceContext::new_root(sampled)
    }

    #[test]
    fn the_standard_names_are_read_and_others_refused() {
        assert_eq!(
            Sampler::from_name("parentbased_always_on", None).unwrap(),
            Sampler::default()
        );
        let off = Sampler::from_name("always_off", None).unwrap();
        assert!(!off.samples(TraceId::random(), Some(&parent(true))));
        let on = Sampler::from_name("always_on", None).unwrap();
        assert!(on.samples(TraceId::random(), Some(&parent(false))));
        let error = Sampler::from_name("sometimes", None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("parentbased_traceidratio"), "{error}");
        for bad in ["1.5", "-0.1", "half"] {
            assert!(matches!(
                Sampler::from_name("traceidratio", Some(bad)),
                Err(SamplerError::BadRatio(_))
            ));
        }
    }

    #[test]
    fn a_parent_based_sampler_follows_the_parent_and_samples_roots_by_its_own_rule() {
        let sampler = Sampler::from_name("parentbased_always_off", None).unwrap();
        assert!(sampler.samples(TraceId::random(), Some(&parent(true))));
        assert!(!sampler.samples(TraceId::random(), Some(&parent(false))));
        assert!(!sampler.samples(TraceId::random(), None));
    }

    #[test]
    fn a_ratio_samples_about_that_fraction_of_random_traces() {
        let sampler = Sampler::from_name("traceidratio", Some("0.25")).unwrap();
        let sampled = (0..4000)
            .filter(|_| sampler.samples(TraceId::random(), None))
            .count();
        assert!((800..1200).contains(&sampled), "{sampled} of 4000");
        let none = Sampler::from_name("traceidratio", Some("0")).unwrap();
        assert!(!(0..100).any(|_| none.samples(TraceId::random(), None)));
    }
}
