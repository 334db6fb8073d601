//! What every served version of the contract declares alike: the records
//! whose shape did not change (conditions, events, object refs, the pass's
//! verdict), and the interfaces that did not change (`controller-client`,
//! `log`, `config`). Each version's bindings are their own Rust types, so
//! the same conversions and trait impls are written here once and expanded
//! in each version's module, where `wit` (its `types`), `host` and `config`
//! name that version's bindings.

/// Expands, in a version's module, the conversions and host impls it
/// shares with every other version. `not_granted` makes that version's
/// error for a store denial from its message.
macro_rules! shared_contract {
    (not_granted: $not_granted:expr) => {
        /// A host value as this version of the contract hands it over.
        pub(crate) trait ToWit {
            /// This version's type for it.
            type Wit;

            fn to_wit(&self) -> Self::Wit;
        }

        impl ToWit for crate::object::ObjectRef {
            type Wit = wit::ObjectRef;

            fn to_wit(&self) -> wit::ObjectRef {
                wit::ObjectRef {
                    id: self.id,
                    group: self.group_kind.group.clone(),
                    kind: self.group_kind.kind.clone(),
                }
            }
        }

        impl ToWit for crate::event::Event {
            type Wit = wit::Event;

            fn to_wit(&self) -> wit::Event {
                wit::Event {
                    id: self.id,
                    object_id: self.object_id,
                    category: self.category.clone(),
                    event_type: match self.type_ {
                        crate::event::EventType::Normal => wit::EventType::Normal,
                        crate::event::EventType::Warning => wit::EventType::Warning,
                    },
                    reason: self.reason.clone(),
                    message: self.message.clone(),
                    detail: self.detail.as_ref().map(|d| d.as_str().to_string()),
                    count: self.count,
                    first_at_ms: self.first_at.as_millis(),
                    last_at_ms: self.last_at.as_millis(),
                    resource_version: self.resource_version,
                }
            }
        }

        impl<T: ToWit> ToWit for Vec<T> {
            type Wit = Vec<T::Wit>;

            fn to_wit(&self) -> Vec<T::Wit> {
                self.iter().map(T::to_wit).collect()
            }
        }

        impl<T: ToWit> ToWit for Option<T> {
            type Wit = Option<T::Wit>;

            fn to_wit(&self) -> Option<T::Wit> {
                self.as_ref().map(T::to_wit)
            }
        }

        /// What `get-or-create` and `create-or-update` answer: the object,
        /// and whether this call created it.
        impl<T: ToWit> ToWit for (T, bool) {
            type Wit = (T::Wit, bool);

            fn to_wit(&self) -> (T::Wit, bool) {
                (self.0.to_wit(), self.1)
            }
        }

        impl ToWit for () {
            type Wit = ();

            fn to_wit(&self) {}
        }

        impl ToWit for bool {
            type Wit = bool;

            fn to_wit(&self) -> bool {
                *self
            }
        }

        type HostResult<T> = wasmtime::Result<Result<T, wit::Error>>;

        /// A host call's answer in this version's terms.
        fn reply<T: ToWit>(call: crate::plugin::verbs::Call<T>) -> HostResult<T::Wit> {
            Ok(call?.map(|value| value.to_wit()).map_err(error))
        }

        /// The contract's error in this version's terms.
        pub(crate) fn error(e: beehive_types::ContractError) -> wit::Error {
            use beehive_types::ContractError as C;
            use wit::Error as W;
            match e {
                C::NotFound(m) => W::NotFound(m),
                C::NameTaken(m) => W::NameTaken(m),
                C::DeletionPending(m) => W::DeletionPending(m),
                C::InvalidName => W::InvalidName,
                C::WrongKind(m) => W::WrongKind(m),
                C::InvalidOption(m) => W::InvalidOption(m),
                C::InvalidDocument(m) => W::InvalidDocument(m),
                C::Decode(m) => W::Decode(m),
                C::NotLoaded(m) => W::NotLoaded(m),
                C::DuplicateConditionType(m) => W::DuplicateConditionType(m),
                C::InvalidCondition(m) => W::InvalidCondition(m),
                C::InvalidResult(m) => W::InvalidResult(m),
                C::ReconcileReturned => W::ReconcileReturned,
                C::NoController(m) => W::NoController(m),
                C::StoreInUse(m) => W::StoreInUse(m),
                C::DependencyCycle(cycle) => W::DependencyCycle(cycle),
                C::TransactionTimedOut => W::TransactionTimedOut,
                C::NoTransaction => W::NoTransaction,
                C::ConcurrentNestedTransaction => W::ConcurrentNestedTransaction,
                C::StaleTransaction => W::StaleTransaction,
                C::SchemaVersionDowngrade(m) => W::SchemaVersionDowngrade(m),
                C::WatchTooOld => W::WatchTooOld,
                C::WatchTooNew => W::WatchTooNew,
                C::Stopped => W::Stopped,
                denied @ C::NotGranted { .. } => ($not_granted)(denied.to_string()),
                C::Other(m) => W::Other(m),
            }
        }

        fn condition_status(status: crate::object::ConditionStatus) -> wit::ConditionStatus {
            match status {
                crate::object::ConditionStatus::True => wit::ConditionStatus::IsTrue,
                crate::object::ConditionStatus::False => wit::ConditionStatus::IsFalse,
                crate::object::ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
            }
        }

        /// A condition of an object a pass lends the guest.
        fn condition_param(c: &crate::object::Condition) -> wit::ConditionParam<'_> {
            wit::ConditionParam {
                type_: &c.type_,
                status: condition_status(c.status),
                reason: &c.reason,
                message: &c.message,
                liveness: c.liveness,
                unconfirmed: c.unconfirmed,
                transitioned_at_ms: c.transitioned_at.as_millis(),
                updated_at_ms: c.updated_at.as_millis(),
            }
        }

        /// A condition of an object a host call answers with.
        fn condition_result(c: &crate::object::Condition) -> wit::ConditionResult {
            wit::ConditionResult {
                type_: c.type_.clone(),
                status: condition_status(c.status),
                reason: c.reason.clone(),
                message: c.message.clone(),
                liveness: c.liveness,
                unconfirmed: c.unconfirmed,
                transitioned_at_ms: c.transitioned_at.as_millis(),
                updated_at_ms: c.updated_at.as_millis(),
            }
        }

        /// A condition the plugin sets; the stamps are the host's to write.
        fn host_condition(c: wit::ConditionResult) -> crate::object::Condition {
            let status = match c.status {
                wit::ConditionStatus::IsTrue => crate::object::ConditionStatus::True,
                wit::ConditionStatus::IsFalse => crate::object::ConditionStatus::False,
                wit::ConditionStatus::Unknown => crate::object::ConditionStatus::Unknown,
            };
            crate::object::Condition::new(c.type_, status)
                .reason(c.reason)
                .message(c.message)
                .liveness(c.liveness)
        }

        /// What `reconcile` returned, in the host's terms.
        pub(crate) fn pass_result(result: wit::ReconcileResult) -> super::PassResult {
            super::PassResult {
                verdict: match result.verdict {
                    wit::Verdict::Settled => super::Verdict::Settled,
                    wit::Verdict::Unsettled => super::Verdict::Unsettled,
                    wit::Verdict::Failed(message) => super::Verdict::Failed(message),
                },
                requeue_after_ms: result.requeue_after_ms,
            }
        }

        impl wit::Host for PluginState {}

        impl config::Host for PluginState {
            async fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
                Ok(verbs::config_get(self, &key))
            }

            async fn keys(&mut self) -> wasmtime::Result<Vec<String>> {
                Ok(verbs::config_keys(self))
            }
        }

        impl host::Host for PluginState {
            async fn log(&mut self, level: host::Level, message: String) -> wasmtime::Result<()> {
                let level = match level {
                    host::Level::Trace => tracing::Level::TRACE,
                    host::Level::Debug => tracing::Level::DEBUG,
                    host::Level::Info => tracing::Level::INFO,
                    host::Level::Warn => tracing::Level::WARN,
                    host::Level::Error => tracing::Level::ERROR,
                };
                verbs::log(self, level, &message);
                Ok(())
            }
        }

        impl host::HostControllerClient for PluginState {
            async fn update_status(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                status: String,
            ) -> HostResult<()> {
                reply(verbs::write_outcome(self, &handle, Outcome::Status(status)).await)
            }

            async fn set_condition(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                condition: wit::ConditionResult,
            ) -> HostResult<()> {
                reply(verbs::set_condition(self, &handle, host_condition(condition)).await)
            }

            async fn set_conditions(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                conditions: Vec<wit::ConditionResult>,
            ) -> HostResult<()> {
                let conditions = conditions.into_iter().map(host_condition).collect();
                reply(verbs::write_outcome(self, &handle, Outcome::Conditions(conditions)).await)
            }

            async fn delete_condition(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                type_: String,
            ) -> HostResult<()> {
                reply(verbs::write_outcome(self, &handle, Outcome::DeleteCondition(type_)).await)
            }

            async fn add_event(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                event: wit::EventSpec,
            ) -> HostResult<()> {
                let event = match verbs::event_spec(
                    event.category,
                    matches!(event.event_type, wit::EventType::Warning),
                    event.reason,
                    event.message,
                    event.detail,
                ) {
                    Ok(event) => event,
                    Err(refused) => return Ok(Err(error(refused))),
                };
                reply(verbs::write_outcome(self, &handle, Outcome::Event(event)).await)
            }

            async fn add_finalizer(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                finalizer: String,
            ) -> HostResult<()> {
                reply(verbs::write_outcome(self, &handle, Outcome::AddFinalizer(finalizer)).await)
            }

            async fn delete_finalizer(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                finalizer: String,
            ) -> HostResult<()> {
                let outcome = Outcome::DeleteFinalizer(finalizer);
                reply(verbs::write_outcome(self, &handle, outcome).await)
            }

            async fn add_dependency(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                target: ObjectId,
            ) -> HostResult<()> {
                reply(verbs::add_dependency(self, &handle, target).await)
            }

            async fn delete_dependency(
                &mut self,
                handle: Resource<ControllerClientHandle>,
                target: ObjectId,
            ) -> HostResult<()> {
                let outcome = Outcome::DeleteDependency(target);
                reply(verbs::write_outcome(self, &handle, outcome).await)
            }

            async fn has_incoming_edges(
                &mut self,
                handle: Resource<ControllerClientHandle>,
            ) -> HostResult<bool> {
                reply(verbs::has_incoming_edges(self, &handle))
            }

            async fn get_owner(
                &mut self,
                handle: Resource<ControllerClientHandle>,
            ) -> HostResult<Option<wit::ObjectRef>> {
                reply(verbs::own_owner(self, &handle))
            }

            async fn list_dependencies(
                &mut self,
                handle: Resource<ControllerClientHandle>,
            ) -> HostResult<Vec<wit::ObjectRef>> {
                reply(verbs::own_edges(self, &handle, Edges::Dependencies))
            }

            async fn list_dependents(
                &mut self,
                handle: Resource<ControllerClientHandle>,
            ) -> HostResult<Vec<wit::ObjectRef>> {
                reply(verbs::own_edges(self, &handle, Edges::Dependents))
            }

            async fn list_owned(
                &mut self,
                handle: Resource<ControllerClientHandle>,
            ) -> HostResult<Vec<wit::ObjectRef>> {
                reply(verbs::own_edges(self, &handle, Edges::Owned))
            }

            async fn begin(&mut self, handle: Resource<ControllerClientHandle>) -> HostResult<()> {
                reply(verbs::frame(self, &handle, Frame::Begin).await)
            }

            async fn commit(&mut self, handle: Resource<ControllerClientHandle>) -> HostResult<()> {
                reply(verbs::frame(self, &handle, Frame::Commit).await)
            }

            async fn rollback(
                &mut self,
                handle: Resource<ControllerClientHandle>,
            ) -> HostResult<()> {
                reply(verbs::frame(self, &handle, Frame::Rollback).await)
            }

            async fn drop(
                &mut self,
                handle: Resource<ControllerClientHandle>,
            ) -> wasmtime::Result<()> {
                verbs::drop_controller_client(self, handle)
            }
        }
    };
}
