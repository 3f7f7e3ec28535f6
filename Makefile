# Gantry developer commands. `make dev` and `make test` are the two entry points; both
# install what is missing first (deploy/setup.sh) and are quick when it is all there.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
TOOLS_BIN := $(CURDIR)/.tools/bin
export PATH := $(TOOLS_BIN):$(PATH)
FORGE := cd contracts && forge

.PHONY: setup dev test test-contracts test-rust chaos bench gas snapshot artifacts lint fmt

## Install the project-local tools (.tools/) and the Debian packages that are missing.
setup:
	@deploy/setup.sh

## Start the local network: anvil with the contracts and the test token, nats-server,
## gantry-indexer, gantry-matcher, gantry-liveness, one gantry-worker and gantry-api with the
## dashboard on http://127.0.0.1:8080/ (Ctrl-C stops it all).
dev: setup
	cargo build --quiet -p gantry-devnet -p gantry-indexer -p gantry-matcher -p gantry-worker -p gantry-api
	cargo run --quiet -p gantry-devnet -- up $(ARGS)

## Run every test: Foundry unit, fuzz and invariant suites, the gas snapshot check, and
## the Rust tests (anvil lifecycle and artifact freshness included).
test: setup test-contracts test-rust

test-contracts:
	$(FORGE) test
	$(FORGE) snapshot --check --match-test 'test_gas_'

test-rust:
	cargo test --workspace --locked

## The chaos suite: ten seeds (SEED=first, default from the clock; SEEDS=count) of the
## whole network with replicas under kills, stops, nats-server restarts and reorgs, each
## judged against the chain and ending with a JSON line. `make test` runs a short one.
chaos: setup
	cargo build --quiet --workspace --bins --locked
	cargo run --quiet -p gantry-devnet -- chaos --seeds $(or $(SEEDS),10) $(if $(SEED),--seed $(SEED))

## Run every benchmark (each prints its figures and a final JSON line), the end-to-end
## throughput last: 1,000 jobs from post to paid on the dev network with 4 workers, then
## the whole network at 10,000 simulated nodes and 100,000 jobs (measured until 240 s after
## the last posting: at today's matcher, ~46 paid a second, the 100,000 would take 35 min).
bench: setup
	cargo build --release --workspace --locked
	cargo bench --workspace --locked --bench lifecycle_gas --bench backfill --bench decide --bench restart --bench latency --bench start --bench wasm_start --bench http
	cargo bench -p gantry-devnet --locked --bench e2e
	cargo bench -p gantry-devnet --locked --bench e2e -- wasm
	cargo bench -p gantry-devnet --locked --bench scale -- --window 240

## Rewrite contracts/.gas-snapshot after a deliberate gas change.
snapshot: setup
	$(FORGE) snapshot --match-test 'test_gas_'

## Rebuild the contracts and rewrite the committed artifacts the Rust bindings use.
## (A new contract in ARTIFACT_CONTRACTS first needs a placeholder artifact,
## {"abi":[],"bytecode":"0x","deployedBytecode":"0x"}, for the bindings to compile.)
artifacts: setup
	cargo run --quiet -p gantry-devnet -- artifacts

lint: setup
	cargo clippy --workspace --all-targets --locked -- -D warnings
	$(FORGE) fmt --check

fmt: setup
	cargo fmt --all
	$(FORGE) fmt
