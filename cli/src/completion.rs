//! Shell completion. clap writes the script that completes commands and
//! flags; a hook added to it asks `beehive __complete` for the values only
//! the store knows (kinds, and object names of a kind), and falls back to
//! clap's completion when it offers none.
//!
//! Which value a word is comes from the command line's own definition: a
//! positional argument named `kind` (or `explain`'s `target`) takes a kind
//! (or `KIND/NAME`), one named `name` or `names` an object of the kind
//! before it. A new command
//! declared that way completes with no change here.

use std::time::Duration;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::endpoint::Paths;
use crate::flags::Cli;
use crate::protocol::{Reply, Request};

/// The most candidates one completion offers: a kind may hold a million
/// objects, and a shell shows a few screens at most.
pub(crate) const MAX_CANDIDATES: usize = 1000;

/// How long a completion may take: a shell waits on it with the user's
/// keyboard blocked, so a store out of reach gives no candidates rather
/// than a hang.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// The completion script for `shell`: clap's, with the hook in bash, zsh
/// and fish (elvish and PowerShell complete commands and flags only).
pub(crate) fn script(shell: Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "beehive", &mut script);
    let mut script = String::from_utf8_lossy(&script).into_owned();
    match shell {
        Shell::Bash => script.push_str(BASH_HOOK),
        Shell::Zsh => script.push_str(ZSH_HOOK),
        Shell::Fish => script.push_str(FISH_HOOK),
        _ => {}
    }
    script
}

/// bash: the dynamic candidates when there are some, else clap's.
const BASH_HOOK: &str = r#"
_beehive_dynamic() {
    local cur="${COMP_WORDS[COMP_CWORD]}"
    local IFS=$'\n'
    local candidates=($(beehive __complete -- "${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null))
    if [ "${#candidates[@]}" -gt 0 ]; then
        COMPREPLY=("${candidates[@]}")
    else
        _beehive "$@"
    fi
}
complete -F _beehive_dynamic -o bashdefault -o default beehive
"#;

/// zsh: the same, around clap's `_beehive`.
const ZSH_HOOK: &str = r#"
_beehive_dynamic() {
    local -a candidates
    candidates=(${(f)"$(beehive __complete -- ${words[2,CURRENT-1]} ${words[CURRENT]} 2>/dev/null)"})
    if (( ${#candidates} )); then
        compadd -a candidates
    else
        _beehive "$@"
    fi
}
compdef _beehive_dynamic beehive
"#;

/// fish: added to clap's candidates for every word.
const FISH_HOOK: &str = r#"
complete -c beehive -f -a '(beehive __complete -- (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null)'
"#;

/// What a word on the command line stands for.
#[derive(Debug, PartialEq, Eq)]
enum Slot {
    /// A kind, or `KIND/NAME`.
    Kind,
    /// A name of an object of this kind.
    Name(String),
    /// Something else: clap's completion applies.
    Other,
}

/// Which slot the last of `words` (the one being completed) fills, from
/// the words before it: the command, its flags and its positionals.
fn slot(words: &[String]) -> Slot {
    let Some((_current, before)) = words.split_last() else {
        return Slot::Other;
    };
    let mut command = Cli::command();
    command.build();
    let mut command = &command;
    let mut positionals = Vec::new();
    let mut words = before.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            positionals.extend(words.by_ref().cloned());
            break;
        }
        if word.starts_with('-') && word.len() > 1 {
            if takes_value(command, word) && !word.contains('=') && words.next().is_none() {
                // The word being completed is this flag's value.
                return Slot::Other;
            }
            continue;
        }
        match command.find_subcommand(word) {
            Some(sub) if positionals.is_empty() => command = sub,
            _ => positionals.push(word.clone()),
        }
    }
    let declared: Vec<&clap::Arg> = command.get_positionals().collect();
    let Some(arg) = declared.get(positionals.len()).or_else(|| {
        declared
            .last()
            .filter(|last| last.get_num_args().is_some_and(|n| n.max_values() > 1))
    }) else {
        return Slot::Other;
    };
    match arg.get_id().as_str() {
        // `explain`'s target starts with the kind.
        "kind" | "target" => Slot::Kind,
        "name" | "names" => match positionals.first() {
            Some(kind) if !kind.contains('/') && declared[0].get_id() == "kind" => {
                Slot::Name(kind.clone())
            }
            _ => Slot::Other,
        },
        _ => Slot::Other,
    }
}

/// Whether `flag` (`-o`, `--output`, `--output=x`) takes a value in
/// `command`, global flags included.
fn takes_value(command: &clap::Command, flag: &str) -> bool {
    let flag = flag.split('=').next().unwrap_or(flag);
    command.get_arguments().any(|arg| {
        let named = match flag.strip_prefix("--") {
            Some(long) => arg.get_long() == Some(long),
            None => flag
                .strip_prefix('-')
                .and_then(|short| short.chars().next())
                .is_some_and(|short| arg.get_short() == Some(short)),
        };
        named && arg.get_action().takes_values()
    })
}

/// The database `words` name with `--db`, if they do.
fn db_in(words: &[String]) -> Option<String> {
    let mut words = words.iter();
    while let Some(word) = words.next() {
        if word == "--db" {
            return words.next().cloned();
        }
        if let Some(value) = word.strip_prefix("--db=") {
            return Some(value.to_string());
        }
    }
    None
}

/// The candidates for the last of `words`, one per line; none when the
/// store is out of reach or slow.
pub(crate) async fn candidates(paths: &Paths, words: Vec<String>) -> String {
    let current = words.last().cloned().unwrap_or_default();
    let paths = match db_in(&words) {
        Some(db) => Paths::new(std::path::Path::new(&db)),
        None => paths.clone(),
    };
    let asked = async {
        match slot(&words) {
            Slot::Kind => match current.split_once('/') {
                Some((kind, prefix)) => names(&paths, kind, prefix)
                    .await
                    .into_iter()
                    .map(|name| format!("{kind}/{name}"))
                    .collect(),
                None => kinds(&paths, &current).await,
            },
            Slot::Name(kind) => names(&paths, &kind, &current).await,
            Slot::Other => Vec::new(),
        }
    };
    let found = tokio::time::timeout(ANSWER_WITHIN, asked)
        .await
        .unwrap_or_default();
    found.into_iter().map(|c| c + "\n").collect()
}

async fn kinds(paths: &Paths, prefix: &str) -> Vec<String> {
    if crate::commands::no_database(paths) {
        return Vec::new();
    }
    let Ok(Reply::Kinds { kinds }) = crate::commands::dispatch(paths, Request::Kinds).await else {
        return Vec::new();
    };
    let prefix = prefix.to_lowercase();
    kinds
        .into_iter()
        .map(|k| k.kind)
        .filter(|kind| kind.to_lowercase().starts_with(&prefix))
        .take(MAX_CANDIDATES)
        .collect()
}

async fn names(paths: &Paths, kind: &str, prefix: &str) -> Vec<String> {
    if crate::commands::no_database(paths) {
        return Vec::new();
    }
    let request = Request::Names {
        kind: kind.to_string(),
        prefix: prefix.to_string(),
        limit: MAX_CANDIDATES,
    };
    match crate::commands::dispatch(paths, request).await {
        Ok(Reply::Names { names }) => names,
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_of(line: &str) -> Slot {
        let mut words: Vec<String> = line.split(' ').map(String::from).collect();
        if line.ends_with(' ') {
            words.pop();
            words.push(String::new());
        }
        slot(&words)
    }

    #[test]
    fn the_first_positional_of_an_object_command_is_a_kind() {
        assert_eq!(slot_of("get "), Slot::Kind);
        assert_eq!(slot_of("describe gr"), Slot::Kind);
        assert_eq!(slot_of("--db x.db delete "), Slot::Kind);
        assert_eq!(slot_of("explain "), Slot::Kind);
        assert_eq!(slot_of("rollout status "), Slot::Kind);
    }

    #[test]
    fn the_words_after_a_kind_are_its_names() {
        assert_eq!(slot_of("get Greeting "), Slot::Name("Greeting".into()));
        assert_eq!(
            slot_of("get -o yaml greeting a"),
            Slot::Name("greeting".into())
        );
        assert_eq!(
            slot_of("delete greeting ada "),
            Slot::Name("greeting".into())
        );
        assert_eq!(slot_of("get greeting/ada "), Slot::Other);
    }

    #[test]
    fn flag_values_and_commands_are_left_to_clap() {
        assert_eq!(slot_of(""), Slot::Other);
        assert_eq!(slot_of("get -o "), Slot::Other);
        assert_eq!(slot_of("apply -f "), Slot::Other);
        assert_eq!(slot_of("rollout "), Slot::Other);
    }

    #[test]
    fn a_db_flag_among_the_words_names_the_store() {
        let words = ["--db", "a.db", "get", ""].map(String::from);
        assert_eq!(db_in(&words).as_deref(), Some("a.db"));
        let words = ["get", "--db=b.db", ""].map(String::from);
        assert_eq!(db_in(&words).as_deref(), Some("b.db"));
    }
}
