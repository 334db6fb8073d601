//! The objects around one object, as a picture: its owner above, what it
//! owns below, what it depends on to the left, its dependents to the
//! right, each a link to its own page. Drawn on the server as SVG; every
//! name goes through [`text`] and every link through [`segment`].

use std::fmt::Write;

use crate::protocol::{Description, Related};
use crate::web::html::{segment, text};

/// The most neighbours drawn on a side; the rest are counted.
pub const MAX_PER_SIDE: usize = 8;

const WIDTH: i64 = 900;
const BOX_WIDTH: i64 = 200;
const BOX_HEIGHT: i64 = 26;
const GAP: i64 = 8;

/// Where a side's boxes go.
#[derive(Clone, Copy)]
enum Side {
    Above,
    Below,
    Left,
    Right,
}

/// The SVG for `description`'s relations, or nothing when it has none.
pub fn svg(description: &Description, kind: &str, name: &str) -> String {
    let sides: [(Side, &str, Vec<&Related>); 4] = [
        (Side::Above, "owner", description.owner.iter().collect()),
        (Side::Below, "owns", description.children.iter().collect()),
        (
            Side::Left,
            "depends on",
            description.dependencies.iter().collect(),
        ),
        (
            Side::Right,
            "dependent",
            description.dependents.iter().collect(),
        ),
    ];
    if sides.iter().all(|(_, _, related)| related.is_empty()) {
        return String::new();
    }
    let column = |count: usize| count.min(MAX_PER_SIDE + 1) as i64 * (BOX_HEIGHT + GAP);
    let rows = sides
        .iter()
        .filter(|(side, _, _)| matches!(side, Side::Left | Side::Right))
        .map(|(_, _, related)| column(related.len()))
        .max()
        .unwrap_or(0)
        .max(BOX_HEIGHT);
    let above = if description.owner.is_some() {
        BOX_HEIGHT + 40
    } else {
        0
    };
    let below = match description.children.len() {
        0 => 0,
        n => 40 + BOX_HEIGHT * ((n.min(MAX_PER_SIDE + 1) as i64 + 2) / 3) + GAP * 2,
    };
    let height = above + rows + below + 10;
    let center = (WIDTH / 2 - BOX_WIDTH / 2, above + rows / 2 - BOX_HEIGHT / 2);
    let mut svg = format!(
        "<svg class=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"owner and dependency graph\">"
    );
    for (side, relation, related) in &sides {
        for (index, neighbour) in related.iter().take(MAX_PER_SIDE).enumerate() {
            let at = position(*side, index, center, above, rows);
            edge(&mut svg, center, at, relation);
            node(
                &mut svg,
                at,
                "neighbour",
                &neighbour.kind,
                &neighbour.name,
                true,
            );
        }
        if related.len() > MAX_PER_SIDE {
            let (x, y) = position(*side, MAX_PER_SIDE, center, above, rows);
            let _ = write!(
                svg,
                "<text class=\"more\" x=\"{}\" y=\"{}\" font-size=\"12\">and {} more</text>",
                x + 8,
                y + 17,
                related.len() - MAX_PER_SIDE
            );
        }
    }
    node(&mut svg, center, "self", kind, name, false);
    svg.push_str("</svg>");
    svg
}

/// The top-left corner of a side's `index`th box.
fn position(side: Side, index: usize, center: (i64, i64), above: i64, rows: i64) -> (i64, i64) {
    let index = index as i64;
    match side {
        Side::Above => (center.0, 4),
        Side::Below => {
            let x = WIDTH / 2 - (3 * BOX_WIDTH + 2 * GAP) / 2 + (index % 3) * (BOX_WIDTH + GAP);
            (x, above + rows + 40 + (index / 3) * (BOX_HEIGHT + GAP))
        }
        Side::Left => (4, above + index * (BOX_HEIGHT + GAP)),
        Side::Right => (WIDTH - BOX_WIDTH - 4, above + index * (BOX_HEIGHT + GAP)),
    }
}

fn edge(svg: &mut String, from: (i64, i64), to: (i64, i64), relation: &str) {
    let (x1, y1) = (from.0 + BOX_WIDTH / 2, from.1 + BOX_HEIGHT / 2);
    let (x2, y2) = (to.0 + BOX_WIDTH / 2, to.1 + BOX_HEIGHT / 2);
    let _ = write!(
        svg,
        "<line class=\"edge\" x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"#9aa3b2\"><title>{relation}</title></line>"
    );
}

fn node(svg: &mut String, (x, y): (i64, i64), class: &str, kind: &str, name: &str, linked: bool) {
    let label = format!("{kind}/{name}");
    let shown = shorten(&label, 28);
    let fill = if linked { "#ffffff" } else { "#1d2430" };
    let ink = if linked { "#1d2430" } else { "#ffffff" };
    if linked {
        let _ = write!(
            svg,
            "<a class=\"node\" href=\"/objects/{}/{}\">",
            segment(kind),
            segment(name)
        );
    }
    let _ = write!(
        svg,
        "<rect class=\"{class}\" x=\"{x}\" y=\"{y}\" width=\"{BOX_WIDTH}\" height=\"{BOX_HEIGHT}\" rx=\"4\" \
fill=\"{fill}\" stroke=\"#1d2430\"><title>{}</title></rect>\
<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"{ink}\">{}</text>",
        text(&label),
        x + 8,
        y + 17,
        text(&shown),
    );
    if linked {
        svg.push_str("</a>");
    }
}

/// `label` cut to `max` characters, with an ellipsis when cut.
fn shorten(label: &str, max: usize) -> String {
    match label.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &label[..cut]),
        None => label.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Description;

    fn related(name: &str) -> Related {
        Related {
            kind: "Greeting.example.dev".to_string(),
            name: name.to_string(),
        }
    }

    #[test]
    fn each_neighbour_is_a_linked_box_and_a_crowded_side_is_counted() {
        let object: beehive::object::ObjectDocument = serde_json::from_value(serde_json::json!({
            "id": 1, "kind": "GreetingSet", "group": "example.dev", "name": "team",
            "generation": 1, "observedGeneration": null, "observedAt": null,
            "resourceVersion": 1, "deletionRequestedAt": null, "finalizers": [],
            "conditions": [], "createdAt": 0, "updatedAt": 0,
            "spec": {}, "status": null
        }))
        .unwrap();
        let description = Description {
            object,
            owner: None,
            children: (0..10).map(|i| related(&format!("c{i}"))).collect(),
            dependencies: vec![related("<b>odd</b>")],
            dependents: Vec::new(),
            next_pass: None,
            last_pass_trace: None,
            events: Vec::new(),
        };
        let drawn = svg(&description, "GreetingSet.example.dev", "team");
        assert_eq!(drawn.matches("<a class=\"node\"").count(), MAX_PER_SIDE + 1);
        assert!(drawn.contains("and 2 more"), "{drawn}");
        assert!(drawn.contains("href=\"/objects/Greeting.example.dev/%3Cb%3Eodd%3C%2Fb%3E\""));
        assert!(drawn.contains("&lt;b&gt;odd&lt;/b&gt;") && !drawn.contains("<b>"));
        assert_eq!(drawn.matches("<rect class=\"self\"").count(), 1);
        let alone = Description {
            children: Vec::new(),
            dependencies: Vec::new(),
            ..description
        };
        assert_eq!(svg(&alone, "GreetingSet.example.dev", "team"), "");
    }
}
