//! The `rollouts` table: the versions each kind has been served by, and how
//! far the newest one's pass over every object has gone.

use crate::error::Result;
use crate::object::{GroupKind, ObjectId, Timestamp};
use crate::store::backend::{Conn, params};

/// The revisions kept per kind; older ones are forgotten as new ones come.
pub const REVISIONS_KEPT: i64 = 50;

/// Where a revision's rollout stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutState {
    /// Objects are still waiting for their first pass on this version.
    Rolling,
    /// Every object that existed when it started has had a pass on it (or
    /// is gone); also the state of a kind's first version, which replaced
    /// nothing.
    Complete,
    /// Another version replaced it before its rollout finished.
    Superseded,
}

impl RolloutState {
    /// The state as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutState::Rolling => "rolling",
            RolloutState::Complete => "complete",
            RolloutState::Superseded => "superseded",
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "rolling" => RolloutState::Rolling,
            "superseded" => RolloutState::Superseded,
            // The table's CHECK admits only these three.
            _ => RolloutState::Complete,
        }
    }
}

/// One version a kind was served by, and its rollout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollout {
    /// The kind.
    pub group_kind: GroupKind,
    /// Counts up from 1 per kind, one per controller registered or replaced.
    pub revision: i64,
    /// Where the controller came from: `native`, or a plugin file.
    pub source: String,
    /// The plugin's content hash, for a plugin.
    pub content_hash: Option<String>,
    /// Where its rollout stands.
    pub state: RolloutState,
    /// When this version began to serve.
    pub started_at: Timestamp,
    /// When its rollout completed or was superseded.
    pub finished_at: Option<Timestamp>,
    /// The kind's objects when it began.
    pub objects: i64,
    /// Objects whose first pass on this version succeeded.
    pub passed: i64,
    /// Objects whose first pass on this version failed.
    pub failed: i64,
    /// Every object with an id at or below it has had its pass.
    pub through_id: ObjectId,
}

/// Records `rollout` as the kind's newest revision; any revision still
/// rolling becomes superseded, and revisions past [`REVISIONS_KEPT`] go.
pub(crate) fn insert(conn: Conn<'_>, rollout: &Rollout) -> Result<()> {
    let gk = &rollout.group_kind;
    conn.execute(
        "UPDATE rollouts SET state = 'superseded', finished_at = ?3 \
         WHERE grp = ?1 AND kind = ?2 AND state = 'rolling'",
        params![&gk.group, &gk.kind, rollout.started_at.as_millis()],
    )?;
    conn.execute(
        "INSERT INTO rollouts (grp, kind, revision, source, content_hash, state, started_at, \
                               finished_at, objects, passed, failed, through_id) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            &gk.group,
            &gk.kind,
            rollout.revision,
            &rollout.source,
            rollout.content_hash.as_deref(),
            rollout.state.as_str(),
            rollout.started_at.as_millis(),
            rollout.finished_at.map(Timestamp::as_millis),
            rollout.objects,
            rollout.passed,
            rollout.failed,
            rollout.through_id,
        ],
    )?;
    conn.execute(
        "DELETE FROM rollouts WHERE grp = ?1 AND kind = ?2 AND revision <= ?3",
        params![&gk.group, &gk.kind, rollout.revision - REVISIONS_KEPT],
    )?;
    Ok(())
}

/// Records how far `rollout` has gone, and its state. A revision no longer
/// rolling (superseded meanwhile, by another process) is left as it is.
pub(crate) fn update_progress(conn: Conn<'_>, rollout: &Rollout) -> Result<()> {
    let gk = &rollout.group_kind;
    conn.execute(
        "UPDATE rollouts SET state = ?4, finished_at = ?5, passed = ?6, failed = ?7, \
                through_id = ?8 \
         WHERE grp = ?1 AND kind = ?2 AND revision = ?3 AND state = 'rolling'",
        params![
            &gk.group,
            &gk.kind,
            rollout.revision,
            rollout.state.as_str(),
            rollout.finished_at.map(Timestamp::as_millis),
            rollout.passed,
            rollout.failed,
            rollout.through_id,
        ],
    )?;
    Ok(())
}

const COLUMNS: &str = "grp, kind, revision, source, content_hash, state, started_at, \
                       finished_at, objects, passed, failed, through_id";

fn from_row(row: &crate::store::backend::Row<'_>) -> Result<Rollout> {
    Ok(Rollout {
        group_kind: crate::store::rows::objects::group_kind_at(row, 0)?,
        revision: row.get(2)?,
        source: row.get(3)?,
        content_hash: row.get(4)?,
        state: RolloutState::parse(&row.get::<String>(5)?),
        started_at: Timestamp::from_millis(row.get(6)?),
        finished_at: row.get::<Option<i64>>(7)?.map(Timestamp::from_millis),
        objects: row.get(8)?,
        passed: row.get(9)?,
        failed: row.get(10)?,
        through_id: row.get(11)?,
    })
}

/// The revisions of `gk` recorded, oldest first.
pub(crate) fn list(conn: Conn<'_>, gk: &GroupKind) -> Result<Vec<Rollout>> {
    conn.query_all(
        &format!("SELECT {COLUMNS} FROM rollouts WHERE grp = ?1 AND kind = ?2 ORDER BY revision"),
        params![&gk.group, &gk.kind],
        from_row,
    )
}

/// The newest revision of `gk`, if any.
pub(crate) fn latest(conn: Conn<'_>, gk: &GroupKind) -> Result<Option<Rollout>> {
    conn.query_opt(
        &format!(
            "SELECT {COLUMNS} FROM rollouts WHERE grp = ?1 AND kind = ?2 \
             ORDER BY revision DESC LIMIT 1"
        ),
        params![&gk.group, &gk.kind],
        from_row,
    )
}
