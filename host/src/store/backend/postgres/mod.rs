//! The PostgreSQL backend's connections: how one is opened, how a statement
//! runs on it, and the notifications that carry other processes' commits.
//!
//! Statements are prepared once per connection and cached by their text;
//! the store writes `?N` placeholders, which become `$N` here. Every call
//! blocks the calling thread until the server answers (see `driver`), as a
//! SQLite call blocks on the disk.
//!
//! A round trip, not the server's work, is what a statement costs (about
//! 75 us here, most of it two process wake-ups), so statements whose answer
//! nobody reads are *deferred*: queued, and sent in one pipeline with the
//! next statement whose answer is needed, or with the COMMIT. A deferred
//! statement that fails spoils the transaction: the commit then fails, even
//! if a later `ROLLBACK TO` made the server forget the failure.

pub(crate) mod commit;
mod driver;
mod socket;
mod tls;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Config, Notification, Row, SimpleQueryMessage, Statement};

use crate::error::{Error, Result};
use crate::store::backend::params::{Param, RowCount, Savepoint};
use crate::store::backend::sequences::Sequences;
use driver::{DriveError, Driver};
use socket::Socket;
use tls::{Tls, TlsSettings};

/// How long a statement may wait for the server's answer before the call
/// fails. Long enough for any statement the store runs on a healthy server.
pub(crate) const ANSWER_DEADLINE: Duration = Duration::from_secs(60);

/// How long opening a connection may take.
const CONNECT_DEADLINE: Duration = Duration::from_secs(10);

/// The connection string schemes that name a PostgreSQL store.
pub(crate) fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A parsed connection string, and where it says to connect.
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) config: Config,
    /// The connection string as shown to people: no password.
    pub(crate) display: String,
    /// The TLS configuration `sslmode` and `sslrootcert` ask for.
    tls: Arc<rustls::ClientConfig>,
}

impl Target {
    /// Parses `url` (`postgres://user@host:port/db`, or with `?host=/dir` for
    /// a Unix socket directory).
    pub(crate) fn parse(url: &str) -> Result<Target> {
        let (rest, tls) = TlsSettings::split(url)?;
        let mut config: Config = rest.parse().map_err(|e| {
            Error::InvalidOption(format!(
                "{}: not a PostgreSQL connection string: {e}",
                redact(url)
            ))
        })?;
        if config.get_hosts().is_empty() {
            return Err(Error::InvalidOption(format!(
                "{}: the connection string names no host (add one, or ?host=/socket/dir)",
                redact(url)
            )));
        }
        if let Some(mode) = tls.mode {
            config.ssl_mode(mode);
        }
        if config.get_application_name().is_none() {
            config.application_name(application_name());
        }
        Ok(Target {
            display: redact(url),
            config,
            tls: tls.client_config()?,
        })
    }

    /// The same server and database, with `search_path` set to `schema`.
    pub(crate) fn in_schema(&self, schema: &str) -> Target {
        let mut config = self.config.clone();
        config.options(format!("-c search_path={schema}"));
        Target {
            config,
            display: format!("{} (schema {schema})", self.display),
            tls: self.tls.clone(),
        }
    }

    /// A connected socket, and the name the server is known by there (for
    /// TLS).
    fn socket(&self) -> Result<(Socket, String)> {
        let ports = self.config.get_ports();
        let mut last = None;
        for (index, host) in self.config.get_hosts().iter().enumerate() {
            let port = ports.get(index).or(ports.first()).copied().unwrap_or(5432);
            let (socket, name) = match host {
                tokio_postgres::config::Host::Tcp(name) => {
                    (Socket::tcp(name, port, CONNECT_DEADLINE), name.as_str())
                }
                tokio_postgres::config::Host::Unix(dir) => (
                    Socket::unix(&dir.join(format!(".s.PGSQL.{port}"))),
                    "localhost",
                ),
            };
            match socket {
                Ok(socket) => return Ok((socket, name.to_string())),
                Err(error) => last = Some(error),
            }
        }
        Err(Error::Unavailable {
            backend: "postgres",
            message: format!(
                "{}: cannot connect: {}",
                self.display,
                last.map_or_else(|| "no host".to_string(), |e| e.to_string())
            ),
        })
    }
}

/// What each connection is called in `pg_stat_activity` unless the
/// connection string names it: `beehive HOSTNAME:PID`, so an operator can
/// tell which process holds which connection (and end one host's).
fn application_name() -> String {
    format!("beehive {}", crate::process::identity())
}

/// `url` with any password replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match credentials.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

/// One connection: its client, its protocol driver and its prepared
/// statements. Used by one thread at a time (the writer's lock, or the
/// reader pool, sees to it).
pub(crate) struct PgConn {
    client: Client,
    driver: RefCell<Driver>,
    statements: RefCell<HashMap<String, Statement>>,
    /// Statements queued to go with the next round trip, in order.
    deferred: RefCell<Vec<Deferred>>,
    /// Why the open transaction can no longer commit: a deferred statement
    /// failed.
    spoiled: RefCell<Option<String>>,
    /// Savepoints opened and not yet closed, outermost first (see
    /// [`PgConn::open_savepoint`]).
    savepoints: RefCell<Vec<LazySavepoint>>,
    /// Where this store's commits are announced.
    channel: String,
    /// The tenure whose token every commit must still hold (the writer's
    /// connection of an active host), if any.
    fence: std::cell::Cell<Option<i64>>,
}

impl PgConn {
    /// Opens a connection to `target`, whose commits are announced on
    /// `channel`.
    pub(crate) fn connect(target: &Target, channel: &str) -> Result<PgConn> {
        let (socket, host) = target.socket()?;
        let tls = Tls::new(&target.tls, &host)?;
        let state = socket.state();
        let (client, connection) = driver::handshake(
            target.config.connect_raw(socket, tls),
            &state,
            CONNECT_DEADLINE,
        )
        .map_err(drive_error)?
        .map_err(postgres_error)?;
        Ok(PgConn {
            client,
            driver: RefCell::new(Driver::new(connection, state)),
            statements: RefCell::new(HashMap::new()),
            deferred: RefCell::new(Vec::new()),
            spoiled: RefCell::new(None),
            savepoints: RefCell::new(Vec::new()),
            channel: channel.to_string(),
            fence: std::cell::Cell::new(None),
        })
    }

    /// The same connection, announcing commits on `channel`.
    pub(crate) fn with_channel(mut self, channel: &str) -> PgConn {
        self.channel = channel.to_string();
        self
    }

    /// Sends what is deferred, then `request`, in one pipeline, and waits
    /// for all of it.
    fn run<T>(
        &self,
        request: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        self.place_savepoints();
        let deferred = std::mem::take(&mut *self.deferred.borrow_mut());
        let client = &self.client;
        let sent = futures_util::future::join_all(deferred.iter().map(|d| d.send(client)));
        let (deferred_outcomes, outcome) = self
            .driver
            .borrow_mut()
            .block_on(futures_util::future::join(sent, request), ANSWER_DEADLINE)
            .map_err(drive_error)?;
        if let Some(error) = deferred_outcomes.into_iter().find_map(|o| o.err()) {
            let error = postgres_error(error);
            self.spoiled.replace(Some(error.to_string()));
            return Err(error);
        }
        outcome.map_err(postgres_error)
    }

    /// Queues a statement whose answer nobody reads.
    pub(crate) fn execute_later(&self, sql: &str, params: &[Param<'_>]) -> Result<()> {
        let statement = self.statement(sql)?;
        let params = params.iter().map(OwnedParam::from).collect();
        self.deferred
            .borrow_mut()
            .push(Deferred::Statement(statement, params));
        Ok(())
    }

    /// Queues a statement whose row count is read after it was sent.
    pub(crate) fn execute_counted_later(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<RowCount> {
        let statement = self.statement(sql)?;
        let params = params.iter().map(OwnedParam::from).collect();
        let rows = RowCount::unknown();
        self.deferred
            .borrow_mut()
            .push(Deferred::Counted(statement, params, rows.clone()));
        Ok(rows)
    }

    /// Queues parameterless statements (transaction control).
    pub(crate) fn simple_later(&self, sql: &str) {
        self.deferred
            .borrow_mut()
            .push(Deferred::Simple(sql.to_string()));
    }

    /// Starts afresh: nothing queued, nothing spoiled, no savepoint open.
    /// For the start and the end of a transaction.
    pub(crate) fn reset(&self) {
        self.deferred.borrow_mut().clear();
        self.savepoints.borrow_mut().clear();
        self.spoiled.replace(None);
    }

    /// Opens savepoint `name`, lazily: its `SAVEPOINT` is placed in the
    /// queue of deferred statements, where the savepoint began, only when
    /// something queued after that point is about to be sent. A write made
    /// only of deferred statements therefore costs no savepoint at all: if
    /// it fails, its statements are dropped before they reach the server.
    pub(crate) fn open_savepoint(&self, savepoint: Savepoint) {
        let at = self.deferred.borrow().len();
        self.savepoints.borrow_mut().push(LazySavepoint {
            savepoint,
            at,
            placed: false,
        });
    }

    /// Closes the innermost savepoint, keeping or undoing what was written
    /// since it opened.
    pub(crate) fn close_savepoint(&self, keep: bool) {
        let Some(savepoint) = self.savepoints.borrow_mut().pop() else {
            return;
        };
        match (savepoint.placed, keep) {
            (false, true) => {}
            // Nothing after the savepoint was sent: drop it unsent.
            (false, false) => self.deferred.borrow_mut().truncate(savepoint.at),
            (true, true) => self.simple_later(savepoint.savepoint.release_sql()),
            (true, false) => {
                self.simple_later(savepoint.savepoint.rollback_sql());
                self.simple_later(savepoint.savepoint.release_sql());
            }
        }
    }

    /// Puts every open savepoint not yet placed into the queue, where it
    /// began: the queue is about to be sent.
    fn place_savepoints(&self) {
        let mut savepoints = self.savepoints.borrow_mut();
        let mut deferred = self.deferred.borrow_mut();
        // Each insertion shifts the places of the savepoints after it by one.
        let unplaced = savepoints.iter_mut().filter(|s| !s.placed);
        for (inserted, savepoint) in unplaced.enumerate() {
            savepoint.at += inserted;
            deferred.insert(
                savepoint.at,
                Deferred::Simple(savepoint.savepoint.open_sql().to_string()),
            );
            savepoint.placed = true;
        }
    }

    /// Why the open transaction cannot commit, if it cannot.
    pub(crate) fn spoiled(&self) -> Option<String> {
        self.spoiled.borrow().clone()
    }

    fn statement(&self, sql: &str) -> Result<Statement> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.run(self.client.prepare(&numbered(sql)))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    /// Runs one statement; how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<u64> {
        let statement = self.statement(sql)?;
        let params = as_to_sql(params);
        self.run(self.client.execute(&statement, &params))
    }

    /// Runs one query; every row.
    pub(crate) fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
        let statement = self.statement(sql)?;
        let params = as_to_sql(params);
        self.run(self.client.query(&statement, &params))
    }

    /// Makes every later commit check that tenure `token` is current.
    pub(crate) fn set_fence(&self, token: Option<i64>) {
        self.fence.set(token);
    }

    /// The tenure token this connection's commits must still hold.
    pub(crate) fn fence(&self) -> Option<i64> {
        self.fence.get()
    }

    /// Whether a statement could still run: false once the server closed
    /// the connection (a restart, a terminated backend) or it failed, found
    /// out without waiting.
    pub(crate) fn is_alive(&self) -> bool {
        !self.client.is_closed() && !self.driver.borrow_mut().is_closed()
    }

    /// Opens a write transaction and locks the store's counters, so writers
    /// in other processes queue behind it; returns them as committed.
    pub(crate) fn begin_write(&self) -> Result<Sequences> {
        self.reset();
        self.simple_later("BEGIN");
        counters(&self.query(LOCK_COUNTERS, &[])?)
    }

    /// Commits the write transaction begun with counters `begun`: stores
    /// the counters if they moved and announces a moved version on the
    /// store's channel, in the COMMIT's round trip. With `begin_next`, the
    /// next write transaction is opened in that round trip too, and its
    /// counters returned.
    pub(crate) fn commit_write(
        &self,
        begun: Sequences,
        now: Sequences,
        session: i64,
        begin_next: bool,
    ) -> Result<Option<Sequences>> {
        if let Some(why) = self.spoiled() {
            return Err(Error::Database {
                backend: "postgres",
                message: format!("the transaction cannot commit: {why}"),
            });
        }
        // Prepared, unlike the COMMIT's text, so the server need not parse
        // and plan them for every batch.
        if now != begun {
            self.execute_later(
                "UPDATE kv SET value = CASE key WHEN 'resource_version' THEN ?1::BIGINT ELSE ?2::BIGINT END \
                 WHERE key IN ('resource_version', 'object_id')",
                &[Param::Int(now.resource_version), Param::Int(now.object_id)],
            )?;
        }
        if now.resource_version > begun.resource_version {
            let payload = commit::payload(session, now.resource_version);
            self.execute_later(
                "SELECT pg_notify(?1, ?2)",
                &[Param::Text(&self.channel), Param::Text(&payload)],
            )?;
        }
        if let Some(token) = self.fence.get() {
            // Last before the COMMIT: its share lock is held the shortest.
            self.execute_later(commit::FENCE_CHECK, &[Param::Int(token)])?;
        }
        if !begin_next {
            self.simple("COMMIT").map_err(lost_lease)?;
            return Ok(None);
        }
        let lock_counters = self.statement(LOCK_COUNTERS)?;
        // Separate requests, so a next transaction that fails to open
        // cannot hide that this one committed.
        let (committed, begun, locked) = self
            .run(async {
                Ok(futures_util::future::join3(
                    self.client.simple_query("COMMIT"),
                    self.client.batch_execute("BEGIN"),
                    self.client.query(&lock_counters, &[]),
                )
                .await)
            })
            .map_err(lost_lease)?;
        committed.map_err(postgres_error).map_err(lost_lease)?;
        let next = begun.and(locked).map_err(postgres_error);
        match next.and_then(|rows| counters(&rows)) {
            Ok(counters) => Ok(Some(counters)),
            Err(error) => {
                tracing::warn!(%error, "could not open the next write transaction early");
                let _ = self.simple("ROLLBACK");
                Ok(None)
            }
        }
    }

    /// Runs two queries in one round trip; the rows of each.
    pub(crate) fn query_two(
        &self,
        first: (&str, &[Param<'_>]),
        second: (&str, &[Param<'_>]),
    ) -> Result<(Vec<Row>, Vec<Row>)> {
        let (statement_first, statement_second) =
            (self.statement(first.0)?, self.statement(second.0)?);
        let (params_first, params_second) = (as_to_sql(first.1), as_to_sql(second.1));
        let (rows_first, rows_second) = self.run(async {
            Ok(futures_util::future::join(
                self.client.query(&statement_first, &params_first),
                self.client.query(&statement_second, &params_second),
            )
            .await)
        })?;
        Ok((
            rows_first.map_err(postgres_error)?,
            rows_second.map_err(postgres_error)?,
        ))
    }

    /// Runs `sql` (one or more statements, no parameters) in one round trip.
    pub(crate) fn simple(&self, sql: &str) -> Result<Vec<SimpleQueryMessage>> {
        self.run(self.client.simple_query(sql))
    }

    /// Waits up to `timeout` for notifications on channels this connection
    /// listens to.
    pub(crate) fn notifications(&self, timeout: Duration) -> Result<Vec<Notification>> {
        self.driver
            .borrow_mut()
            .notifications(timeout)
            .map_err(drive_error)
    }
}

impl PgConn {
    /// The store's version (its `resource_version` counter), read without
    /// a lock: what a listener that lost its connection takes as heard.
    pub(crate) fn store_version(&self) -> Result<i64> {
        let rows = self.query("SELECT value FROM kv WHERE key = 'resource_version'", &[])?;
        Ok(rows
            .first()
            .and_then(|row| row.try_get::<_, i64>(0).ok())
            .unwrap_or(0))
    }
}

/// Reads the counters under a row lock, so writers in other processes
/// queue behind this transaction.
const LOCK_COUNTERS: &str = "SELECT key, value FROM kv \
     WHERE key IN ('object_id', 'resource_version') ORDER BY key FOR UPDATE";

/// The counters in the answer to [`LOCK_COUNTERS`].
fn counters(rows: &[Row]) -> Result<Sequences> {
    let mut values = rows.iter().filter_map(|row| row.try_get::<_, i64>(1).ok());
    match (values.next(), values.next()) {
        (Some(object_id), Some(resource_version)) => Ok(Sequences {
            resource_version,
            object_id,
        }),
        _ => Err(Error::Database {
            backend: "postgres",
            message: "the store's counters are missing from kv".into(),
        }),
    }
}

/// The channel a store announces its commits on: one per schema, so stores
/// sharing a database do not wake each other.
pub(crate) fn commit_channel(conn: &PgConn) -> Result<String> {
    let rows = conn.query("SELECT current_schema()", &[])?;
    let schema: Option<String> = rows.first().and_then(|row| row.get(0));
    let schema = schema.ok_or_else(|| Error::Database {
        backend: "postgres",
        message: "the connection has no current schema (check search_path)".into(),
    })?;
    Ok(format!("beehive_commits_{schema}"))
}

/// A schema made for one throwaway store, dropped with everything in it
/// when this goes.
pub(crate) struct TempSchema {
    base: Target,
    name: String,
}

impl TempSchema {
    /// Creates a fresh, uniquely named schema in `base`'s database.
    pub(crate) fn create(base: &Target) -> Result<TempSchema> {
        let name = format!("beehive_tmp_{}", uuid::Uuid::new_v4().simple());
        PgConn::connect(base, "")?.simple(&format!("CREATE SCHEMA {name}"))?;
        Ok(TempSchema {
            base: base.clone(),
            name,
        })
    }

    /// Its name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TempSchema {
    fn drop(&mut self) {
        let dropped = PgConn::connect(&self.base, "")
            .and_then(|conn| conn.simple(&format!("DROP SCHEMA {} CASCADE", self.name)));
        if let Err(error) = dropped {
            tracing::warn!(schema = %self.name, %error, "could not drop a temporary store's schema");
        }
    }
}

/// A statement waiting for the next round trip, with its own copy of its
/// parameters.
enum Deferred {
    Statement(Statement, Vec<OwnedParam>),
    /// A statement whose row count someone reads once it was answered.
    Counted(Statement, Vec<OwnedParam>, RowCount),
    Simple(String),
}

/// A savepoint [`PgConn::open_savepoint`] opened: where in the deferred
/// queue it begins, and whether its `SAVEPOINT` statement is there yet.
struct LazySavepoint {
    savepoint: Savepoint,
    at: usize,
    placed: bool,
}

impl Deferred {
    async fn send(&self, client: &Client) -> std::result::Result<(), tokio_postgres::Error> {
        match self {
            Deferred::Statement(statement, params) => {
                let params: Vec<Param<'_>> = params.iter().map(OwnedParam::as_param).collect();
                client
                    .execute(statement, &as_to_sql(&params))
                    .await
                    .map(|_| ())
            }
            Deferred::Counted(statement, params, rows) => {
                let params: Vec<Param<'_>> = params.iter().map(OwnedParam::as_param).collect();
                let changed = client.execute(statement, &as_to_sql(&params)).await?;
                rows.set(changed);
                Ok(())
            }
            Deferred::Simple(sql) => client.batch_execute(sql).await,
        }
    }
}

/// A [`Param`] that owns its value.
enum OwnedParam {
    Int(i64),
    Text(String),
    Null,
    Ids(Vec<i64>),
    Bytes(Vec<u8>),
}

impl OwnedParam {
    fn as_param(&self) -> Param<'_> {
        match self {
            OwnedParam::Int(value) => Param::Int(*value),
            OwnedParam::Text(text) => Param::Text(text),
            OwnedParam::Null => Param::Null,
            OwnedParam::Ids(ids) => Param::Ids(ids),
            OwnedParam::Bytes(bytes) => Param::Bytes(bytes),
        }
    }
}

impl From<&Param<'_>> for OwnedParam {
    fn from(param: &Param<'_>) -> Self {
        match *param {
            Param::Int(value) => OwnedParam::Int(value),
            Param::Text(text) => OwnedParam::Text(text.to_string()),
            Param::Null => OwnedParam::Null,
            Param::Ids(ids) => OwnedParam::Ids(ids.to_vec()),
            Param::Bytes(bytes) => OwnedParam::Bytes(bytes.to_vec()),
        }
    }
}

fn as_to_sql<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

/// `sql` with each `?N` placeholder written `$N`.
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// A commit refused by the fence check says so plainly.
fn lost_lease(error: Error) -> Error {
    match error {
        Error::Database { message, .. } if message.starts_with(commit::LOST) => {
            Error::LeaseLost(message)
        }
        other => other,
    }
}

fn postgres_error(error: tokio_postgres::Error) -> Error {
    let unavailable = out_of_reach(&error);
    let message = match error.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({}): {detail}", db.message(), db.code().code()),
            None => format!("{} ({})", db.message(), db.code().code()),
        },
        // The cause (a TLS handshake's certificate error, an I/O error) is
        // in the source chain, not in the top error's text.
        None => {
            let mut message = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            message
        }
    };
    match unavailable {
        true => Error::Unavailable {
            backend: "postgres",
            message,
        },
        false => Error::Database {
            backend: "postgres",
            message,
        },
    }
}

/// Whether `error` says the server is out of reach rather than that it
/// refused the statement: the connection closed or failed below the
/// protocol, or the server said it is shutting down, starting up or cut
/// the connection (SQLSTATE class 08, and 57P01–57P03).
fn out_of_reach(error: &tokio_postgres::Error) -> bool {
    match error.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        }
        None => error.is_closed() || caused_by_io(error),
    }
}

/// Whether an I/O error is among `error`'s causes: the socket failed.
fn caused_by_io(error: &tokio_postgres::Error) -> bool {
    let mut cause = std::error::Error::source(error);
    while let Some(current) = cause {
        if current.is::<std::io::Error>() {
            return true;
        }
        cause = current.source();
    }
    false
}

/// A driver's failure: every one of them means the server did not answer
/// (or the connection failed), except an error the server sent.
fn drive_error(error: DriveError) -> Error {
    match error {
        DriveError::Connection(error) => postgres_error(error),
        other => Error::Unavailable {
            backend: "postgres",
            message: other.to_string(),
        },
    }
}

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match *self {
            Param::Int(value) => match *ty {
                Type::INT8 => value.to_sql(ty, out),
                Type::INT4 => i32::try_from(value)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(value)?.to_sql(ty, out),
                Type::BOOL => (value != 0).to_sql(ty, out),
                _ => Err(format!("an integer cannot be sent as {ty}").into()),
            },
            Param::Text(text) => text.to_sql(ty, out),
            Param::Null => Ok(IsNull::Yes),
            Param::Ids(ids) => ids.to_sql(ty, out),
            Param::Bytes(bytes) => bytes.to_sql(ty, out),
        }
    }

    fn accepts(_ty: &Type) -> bool {
        // Checked per value in `to_sql`, which knows what it holds.
        true
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_the_postgres_way() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ?1 AND c = ?12 AND d = '?'"),
            "SELECT a FROM t WHERE b = $1 AND c = $12 AND d = '?'"
        );
    }

    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(
            redact("postgres://bee:secret@db.example/hive"),
            "postgres://bee:***@db.example/hive"
        );
        assert_eq!(redact("postgres://bee@db/hive"), "postgres://bee@db/hive");
        let error = Target::parse("postgres://bee:secret@/hive").err().unwrap();
        assert!(!error.to_string().contains("secret"), "{error}");
    }
}
