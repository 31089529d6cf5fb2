//! The procedures the Connect door serves: the contract's unary RPCs, found by their path,
//! and which of them a GET may call.

use std::sync::OnceLock;

use prost::Message;

use crate::pb;
use crate::pb::game_solver_service_server::SERVICE_NAME;

/// The unary RPCs the door serves, each a Connect procedure at its gRPC path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Procedure {
    Solve,
    SolveBatch,
}

impl Procedure {
    pub(super) const ALL: [Procedure; 2] = [Procedure::Solve, Procedure::SolveBatch];

    /// The RPC's name in the contract.
    pub(super) fn name(self) -> &'static str {
        match self {
            Procedure::Solve => "Solve",
            Procedure::SolveBatch => "SolveBatch",
        }
    }

    /// The procedure at an HTTP path (`/gamesolver.v1.GameSolverService/Solve`).
    pub(super) fn at(path: &str) -> Option<Procedure> {
        let method = path.strip_prefix('/')?.strip_prefix(SERVICE_NAME)?.strip_prefix('/')?;
        Procedure::ALL.into_iter().find(|procedure| procedure.name() == method)
    }

    /// True when the contract marks the RPC `NO_SIDE_EFFECTS`, which lets Connect
    /// clients send it as a GET.
    pub(super) fn allows_get(self) -> bool {
        static IDEMPOTENT: OnceLock<Vec<String>> = OnceLock::new();
        IDEMPOTENT
            .get_or_init(|| side_effect_free_methods(pb::FILE_DESCRIPTOR_SET))
            .iter()
            .any(|m| m == self.name())
    }
}

/// The methods of `SERVICE_NAME` that an encoded descriptor set marks `NO_SIDE_EFFECTS`.
fn side_effect_free_methods(descriptor_set: &[u8]) -> Vec<String> {
    use prost_types::method_options::IdempotencyLevel;
    let Ok(set) = prost_types::FileDescriptorSet::decode(descriptor_set) else { return Vec::new() };
    set.file
        .iter()
        .flat_map(|file| file.service.iter().map(move |service| (file.package(), service)))
        .filter(|(package, service)| format!("{package}.{}", service.name()) == SERVICE_NAME)
        .flat_map(|(_, service)| &service.method)
        .filter(|method| {
            method.options.as_ref().is_some_and(|o| o.idempotency_level() == IdempotencyLevel::NoSideEffects)
        })
        .map(|method| method.name().to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_procedures_are_the_contracts_unary_rpcs_and_solve_may_be_a_get() {
        let set = prost_types::FileDescriptorSet::decode(pb::FILE_DESCRIPTOR_SET).unwrap();
        let service =
            set.file.iter().flat_map(|f| &f.service).find(|s| s.name() == "GameSolverService").unwrap();
        let unary: Vec<_> = service
            .method
            .iter()
            .filter(|m| !m.client_streaming() && !m.server_streaming())
            .map(|m| m.name().to_owned())
            .collect();
        assert_eq!(unary, Procedure::ALL.map(|p| p.name().to_owned()));
        assert!(Procedure::Solve.allows_get());
        assert!(!Procedure::SolveBatch.allows_get());
        assert_eq!(Procedure::at("/gamesolver.v1.GameSolverService/Solve"), Some(Procedure::Solve));
        assert_eq!(Procedure::at("/gamesolver.v1.GameSolverService/SolveStream"), None);
        assert_eq!(Procedure::at("/gamesolver.v1.GameSolverServiceX/Solve"), None);
    }
}
