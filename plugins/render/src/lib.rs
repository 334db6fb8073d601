//! A controller that owns files: each `Page.example.dev` is rendered into
//! `/out/NAME.html`, a directory the operator grants in `render.toml`:
//!
//! ```toml
//! [files."/out"]
//! path = "/srv/pages"
//! access = "read-write"
//!
//! [config]
//! footer = "served by beehive"   # optional, appended to every page
//! ```
//!
//! Its first pass puts the finalizer `example.dev/rendered-file` on the
//! page, so a deleted page is kept until its file is gone: deleting it
//! removes what it rendered. Without the grant every pass fails with a clear
//! error and retries.

use beehive_guest::finalizer::{Event, finalizer};
use beehive_guest::{Action, ClientOf, Controller, Error, ObjectOf, Registration, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The finalizer that keeps a page until its file is removed.
pub const FINALIZER: &str = "example.dev/rendered-file";

/// The directory the operator grants.
const OUT: &str = "/out";

/// What a page shows.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageSpec {
    /// The heading.
    pub title: String,
    /// The text.
    #[serde(default)]
    pub body: String,
}

/// What was rendered.
#[derive(Debug, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct PageStatus {
    /// The file, as the plugin sees it.
    pub path: String,
    /// Its size.
    pub bytes: usize,
}

/// The controller.
#[derive(Default)]
pub struct Renderer;

/// The file of page `name`.
pub fn file_of(name: &str) -> String {
    format!("{OUT}/{name}.html")
}

/// The page's text.
pub fn render(spec: &PageSpec, footer: Option<&str>) -> String {
    let mut page = format!("<h1>{}</h1>\n<p>{}</p>\n", spec.title, spec.body);
    if let Some(footer) = footer {
        page.push_str(&format!("<footer>{footer}</footer>\n"));
    }
    page
}

impl Controller for Renderer {
    type Spec = PageSpec;
    type Status = PageStatus;

    fn reconcile(&self, client: &ClientOf<'_, Self>, page: &ObjectOf<Self>) -> Result<Action> {
        let path = file_of(&page.meta.name);
        finalizer(client, FINALIZER, page, |event| match event {
            Event::Apply(page) => {
                let footer = beehive_guest::config::get("footer");
                let text = render(&page.spec, footer.as_deref());
                std::fs::write(&path, &text).map_err(|error| {
                    Error::msg(format!(
                        "cannot write {path}: {error} (does render.toml grant {OUT}?)"
                    ))
                })?;
                let bytes = text.len();
                client.update_status(&PageStatus { path, bytes })?;
                Ok(Action::settled())
            }
            Event::Cleanup(_) => match std::fs::remove_file(&path) {
                Ok(()) => Ok(Action::settled()),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Action::settled()),
                Err(error) => Err(Error::msg(format!("cannot remove {path}: {error}"))),
            },
        })
    }

    fn registration() -> Registration {
        Registration::new("example.dev", "Page")
            .spec_schema::<PageSpec>()
            .status_schema::<PageStatus>()
            .finalizers([FINALIZER])
    }
}

beehive_guest::export!(Renderer);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_renders_its_title_body_and_the_configured_footer() {
        let spec = PageSpec {
            title: "Hello".into(),
            body: "World".into(),
        };
        assert_eq!(render(&spec, None), "<h1>Hello</h1>\n<p>World</p>\n");
        assert!(render(&spec, Some("beehive")).ends_with("<footer>beehive</footer>\n"));
        assert_eq!(file_of("home"), "/out/home.html");
    }
}
