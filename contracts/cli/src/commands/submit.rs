//! `gantry job submit`: a spec (file or flags) and requirements (flags) into `postJob`
//! (`postVerifiedJob` with `--verify`).
//! Everything that can be checked without the chain is checked first; then the balance,
//! so that "bounty … exceeds your token balance …" comes before any transaction. The
//! bounty moves with an EIP-2612 permit (`postJobWithPermit`: one transaction, nothing
//! left approved) unless the market may already take it.
//!
//! `--encrypt` (design 19, §3) adds the spec's `encryption`: the result to the user's
//! recipient, and a job key derived from the user's identity and a fresh salt, to which
//! each `--secret-input` file is encrypted here and uploaded before the job is posted.

use gantry_protocol::status::NodeStatus;
use std::collections::BTreeMap;
use std::path::PathBuf;

use alloy::primitives::aliases::{U40, U96};
use alloy::primitives::{B256, U256};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::encryption::{self, AgeRecipient, MIN_ENCRYPTED_RUNTIME_SECS};
use gantry_protocol::names;
use gantry_protocol::spec::{
    Encryption, Engine, INPUTS_DIR, InputSpec, JobKind, JobSpec, MAX_WASM_MODULE_BYTES, ModuleSpec,
    OutputSpec, Resources, SETUP_ALLOWANCE_SECS, SPEC_VERSION, WasmSpec, runtime_for,
};

use crate::Context;
use crate::chain;
use crate::config::{Kind, SubmitArgs};
use crate::error::{CliError, Result};
use crate::identity::{self, Sealed};
use crate::output::{self, Money};
use crate::units::{self, Deadline, Offer};

/// How often a permit is signed again when the token's nonce moved on before it was used.
const PERMIT_RESIGNS: u32 = 3;
/// How long a permit signed for one submission stays valid, seconds.
const PERMIT_VALIDITY: u64 = 3_600;
/// A built spec's timeout when neither --duration nor a spec file says.
const DEFAULT_DURATION: u64 = 3_600;
/// The spec version that has `encryption` and encrypted inputs.
const ENCRYPTED_SPEC_VERSION: u32 = 3;
/// The bytes of a job key's salt (`keySalt`, hex).
const KEY_SALT_BYTES: usize = 16;

pub async fn submit(ctx: &Context, args: &SubmitArgs) -> Result<()> {
    // What needs neither chain nor API (a local module's place names the chain).
    let module = match &args.wasm {
        Some(text) => Some(Module::parse(text)?),
        None => None,
    };
    let secret_inputs = args
        .secret_inputs
        .iter()
        .map(|text| SecretInput::parse(text))
        .collect::<Result<Vec<_>>>()?;
    let recipient = args
        .recipient
        .as_deref()
        .map(|text| {
            encryption::recipient(text).map_err(|e| CliError::usage(format!("--recipient: {e}")))
        })
        .transpose()?;
    let encrypt = args.encrypt || recipient.is_some() || !secret_inputs.is_empty();
    let module_spec = match &module {
        Some(Module::File { sha256, .. }) => Some(ModuleSpec {
            uri: module_uri(ctx.chain().await?.chain_id, sha256),
            sha256: sha256.clone(),
            max_bytes: None,
        }),
        Some(Module::Uri(spec)) => Some(spec.clone()),
        None => None,
    };
    let (mut spec, from_file) = match &args.spec {
        Some(path) => (read_spec(path)?, true),
        None => (build_spec(args, module_spec)?, false),
    };
    let size = |flag: &str, value: &Option<String>| -> Result<u32> {
        value
            .as_deref()
            .map(units::parse_size_mib)
            .transpose()
            .map(Option::unwrap_or_default)
            .map_err(|e| CliError::usage(format!("--{flag}: {e}")))
    };
    let min_vram_mib = size("vram", &args.vram)?;
    let min_ram_mib = size("ram", &args.ram)?;
    let deadline =
        Deadline::parse(&args.deadline).map_err(|e| CliError::usage(format!("--deadline: {e}")))?;
    let mut verify =
        units::parse_verify(&args.verify).map_err(|e| CliError::usage(format!("--verify: {e}")))?;
    check_encryptable(&spec, encrypt, verify.is_verified())?;
    if verify.is_verified() {
        check_verifiable(&spec, &verify, args)?;
    }
    let max_runtime = max_runtime(args, &spec, from_file, verify.is_verified())?;
    if args.reveal_window.is_some() && !verify.is_verified() {
        return Err(CliError::usage(
            "--reveal-window: only a verified job (--verify) has a reveal window",
        ));
    }
    let needs_key = !secret_inputs.is_empty() || spec.needs_job_key();
    check_key_runtime(needs_key, max_runtime, from_file)?;
    // The encryption, and the secret inputs encrypted (not yet uploaded).
    let sealed_inputs = if encrypt {
        encrypt_spec(ctx, &mut spec, recipient, secret_inputs).await?
    } else {
        Vec::new()
    };
    // Posted in canonical form, measured as posted.
    let spec_bytes = spec
        .to_posted()
        .map_err(|e| CliError::usage(format!("the job spec: {e}")))?;

    // The GPU model: an id as given, or a name resolved against what nodes offer.
    let gpu_model = match (&args.gpu_model, args.gpu.as_deref()) {
        (Some(id), _) => units::model_id(id),
        (None, None) | (None, Some("any")) => B256::ZERO,
        (None, Some(name)) => {
            let offers: Vec<Offer> = ctx
                .api
                .all_nodes()
                .await
                .map_err(|e| match e {
                    CliError::Unavailable(why) => CliError::Unavailable(format!(
                        "--gpu {name} is resolved through the API ({why}); give the model id \
                         with --gpu-model to post without it"
                    )),
                    other => other,
                })?
                .into_iter()
                .filter(|n| n.status != NodeStatus::Exited && !n.gpu_model.is_empty())
                .map(|n| Offer {
                    model: n.gpu_model,
                    gpu_count: n.gpu_count,
                    vram_mib: n.vram_mib,
                })
                .collect();
            let min_gpus = u64::from(args.gpus.unwrap_or(1));
            let model = units::resolve_gpu(name, &offers, min_gpus, u64::from(min_vram_mib))
                .map_err(|e| CliError::usage(format!("--gpu: {e}")))?;
            if !ctx.json() {
                eprintln!("--gpu {name}: {}", units::model_name(model));
            }
            model
        }
    };
    let min_gpu_count = args.gpus.unwrap_or(u16::from(!gpu_model.is_zero()));
    if !spec.engine.is_docker() && (min_gpu_count > 0 || min_vram_mib > 0) {
        return Err(CliError::usage(format!(
            "--gpu/--gpus/--vram: a {} job runs on the CPU and takes no GPU",
            spec.engine
        )));
    }
    if !gpu_model.is_zero() && min_gpu_count == 0 {
        return Err(CliError::usage(
            "--gpus 0 with a GPU model: a model needs at least one GPU",
        ));
    }

    // What needs the chain: the token's units and the chain's time.
    let chain = ctx.chain().await?;
    let token = chain.token_info().await?.clone();
    let amount = |flag: &str, text: &str| {
        units::parse_amount(text, token.decimals)
            .map_err(|e| CliError::usage(format!("--{flag}: {e}")))
    };
    let bounty = amount("bounty", &args.bounty)?;
    let bounty = U96::checked_from_limbs_slice(bounty.as_limbs())
        .ok_or_else(|| CliError::usage("--bounty: more than the contract's uint96"))?;
    if bounty.is_zero() {
        return Err(CliError::usage("--bounty: must be more than 0"));
    }
    let max_price = match &args.max_price {
        Some(text) => U96::checked_from_limbs_slice(amount("max-price", text)?.as_limbs())
            .ok_or_else(|| CliError::usage("--max-price: more than the contract's uint96"))?,
        None => U96::MAX,
    };
    let now = chain.now().await?;
    let deadline = deadline.resolve(now);
    if deadline <= now {
        return Err(CliError::usage(format!(
            "--deadline: {} is not after the chain's time {}",
            units::format_time(deadline),
            units::format_time(now)
        )));
    }
    let requirements = JobMarket::JobRequirements {
        gpuModel: gpu_model,
        minGpuCount: min_gpu_count,
        minVramMiB: min_vram_mib,
        minCpuCores: args.cpus,
        minRamMiB: min_ram_mib,
        maxPricePerGpuHour: max_price,
        maxRuntime: max_runtime,
        priority: args.priority,
        engine: spec.engine.code(),
    };
    // The market's posting rules, before anything is signed (the contract's revert would
    // say only "invalid requirements").
    if let Some((field, reason)) = gantry_protocol::market::requirements_refusal(&requirements) {
        return Err(CliError::usage(format!(
            "the market refuses these requirements: {field} {reason}"
        )));
    }
    let money = Money(Some(token.clone()));
    // A verified job: the market's rules for it, and what it escrows (n bounties
    // replicated, one refereed).
    let mut escrow = U256::from(bounty);
    if verify.is_verified() {
        let rules = chain.verify_params().await?;
        if rules.poolFloor.is_zero() {
            return Err(CliError::usage(
                "--verify: this market offers no verified jobs (no verification rules for its policy)",
            ));
        }
        let window = match &args.reveal_window {
            Some(text) => units::parse_duration_secs(text)
                .map_err(|e| CliError::usage(format!("--reveal-window: {e}")))?,
            None => u64::from(rules.minRevealWindow),
        };
        if window < u64::from(rules.minRevealWindow) {
            return Err(CliError::usage(format!(
                "--reveal-window: at least {} s (the market's minimum)",
                rules.minRevealWindow
            )));
        }
        verify.reveal_window = u16::try_from(window)
            .map_err(|_| CliError::usage("--reveal-window: at most 65535 s"))?;
        if verify.tier == gantry_protocol::market::Verification::REPLICATED {
            escrow = U256::from(bounty) * U256::from(verify.size);
        }
    }
    let verified_line = || match verify.tier {
        gantry_protocol::market::Verification::REPLICATED => format!(
            "replicated {}/{}: {} nodes run it, {} equal results decide; escrow {} ({} × the bounty)",
            verify.size,
            verify.quorum,
            verify.size,
            verify.quorum,
            money.show(escrow),
            verify.size
        ),
        _ => format!(
            "refereed by {}: a dispute escrows the bond and {} bounties for the referees",
            verify.size, verify.size
        ),
    };

    if args.dry_run {
        if ctx.json() {
            output::json(&serde_json::json!({
                "requirements": requirements,
                "bounty": bounty.to_string(),
                "deadline": deadline,
                "spec": serde_json::from_slice::<serde_json::Value>(&spec_bytes).expect("a spec is JSON"),
                "specHash": JobSpec::hash_bytes(&spec_bytes),
                "verify": verify_json(&verify),
                "escrow": escrow.to_string(),
            }));
        } else {
            println!("would post (nothing sent):");
            println!("  bounty    {}", money.show(bounty));
            println!("  deadline  {}", units::format_time(deadline));
            println!(
                "  needs     {}",
                output::requirements(&requirements, &money)
            );
            println!("  spec      {}", String::from_utf8_lossy(&spec_bytes));
            if verify.is_verified() {
                println!("  verified  {}", verified_line());
            }
            if let (Some(Module::File { bytes, .. }), Some(wasm)) = (&module, &spec.wasm) {
                println!(
                    "  module    {} bytes, would be uploaded to {}",
                    bytes.len(),
                    wasm.module.uri
                );
            }
            for sealed in &sealed_inputs {
                println!(
                    "  secret    {}: {} bytes encrypted to the job key, would be uploaded to {}",
                    sealed.path, sealed.sealed.bytes, sealed.uri
                );
            }
        }
        return Ok(());
    }
    if let (Some(Module::File { bytes, sha256 }), Some(wasm)) = (&module, &spec.wasm) {
        let what = format!("the module ({sha256})");
        upload(
            &ctx.global.nats_url,
            &wasm.module.uri,
            &mut &bytes[..],
            &what,
        )
        .await?;
        if !ctx.json() {
            eprintln!("module uploaded: {}", wasm.module.uri);
        }
    }
    for sealed in &sealed_inputs {
        let what = format!("the secret input {}", sealed.path);
        let mut file = tokio::fs::File::open(sealed.sealed.file.path())
            .await
            .map_err(|e| CliError::io(sealed.sealed.file.path().display(), e))?;
        upload(&ctx.global.nats_url, &sealed.uri, &mut file, &what).await?;
        if !ctx.json() {
            eprintln!(
                "secret input {} encrypted and uploaded: {}",
                sealed.path, sealed.uri
            );
        }
    }

    // The market spends the submitter's credits first and pulls only the rest.
    let account = chain.account()?;
    let credits = chain.credit(account).await?;
    let pulled = escrow.saturating_sub(credits);
    if !pulled.is_zero() {
        chain.ensure_balance(account, pulled, "bounty").await?;
    }
    let market = *chain.market.address();
    if verify.is_verified() {
        return post_verified(
            ctx,
            chain,
            args,
            requirements,
            &verify,
            (bounty, deadline, spec_bytes),
            pulled,
            &money,
            verified_line(),
        )
        .await;
    }
    let allowance = chain.allowance(account, market).await?;
    // The permit's value is the whole bounty (the market permits that much), so a job
    // partly paid from credits approves exactly what is pulled instead.
    let partly_from_credits = !credits.is_zero() && !pulled.is_zero();
    if partly_from_credits && allowance < pulled {
        chain.approve_if_short(market, pulled).await?;
    }
    let receipt = if pulled.is_zero() || partly_from_credits || allowance >= pulled {
        // An allowance the user set stays as it is: a permit would overwrite it.
        chain
            .send(
                "postJob",
                chain
                    .market
                    .postJob(requirements, bounty, U40::from(deadline), spec_bytes.into()),
            )
            .await?
    } else {
        let permit_deadline = U256::from(now + PERMIT_VALIDITY);
        let mut signed_again = 0;
        loop {
            let (v, r, s, nonce) = chain.permit(market, pulled, permit_deadline).await?;
            let call = chain.market.postJobWithPermit(
                requirements.clone(),
                bounty,
                U40::from(deadline),
                spec_bytes.clone().into(),
                permit_deadline,
                v,
                r,
                s,
            );
            match chain.estimate("postJobWithPermit", &call).await {
                Ok(gas) => break chain.send_estimated("postJobWithPermit", call, gas).await?,
                // The token's nonce moved between the signature and the simulation (a
                // reorganisation took back a transaction of this account, or another
                // spent a permit): the market skips a permit it cannot use and the pull
                // fails. Nothing was sent: signed again for the nonce as it now is.
                Err(refused @ CliError::Refused(_)) => {
                    if signed_again >= PERMIT_RESIGNS || chain.permit_nonce().await? == nonce {
                        return Err(refused);
                    }
                    signed_again += 1;
                    eprintln!(
                        "the token's permit nonce moved on since the signature ({nonce}): signing again"
                    );
                }
                Err(other) => return Err(other),
            }
        }
    };
    // The id is printed only once the posting is as safe as asked, and read from the
    // receipt as the chain then has it (a reorganisation may renumber the job).
    let confirmations = confirmations(args, chain);
    let receipt = chain.confirmed("postJob", receipt, confirmations).await?;
    let posted: JobMarket::JobPosted = chain::logged(&receipt)?;
    let tx = receipt.transaction_hash;
    let mut json = serde_json::json!({
        "jobId": posted.jobId,
        "tx": tx,
        "fromCredits": posted.fromCredits.to_string(),
        "block": receipt.block_number,
        "confirmations": confirmations,
    });
    if let Some(encryption) = &spec.encryption {
        json["encryption"] = serde_json::json!({
            "recipient": encryption.recipient,
            "jobKey": encryption.job_key,
            "needsKeyRelease": spec.needs_job_key(),
        });
    }
    ctx.say(json, || {
        let from_credits = if posted.fromCredits.is_zero() {
            String::new()
        } else {
            format!(" ({} from your credits)", money.show(posted.fromCredits))
        };
        let encrypted = match &spec.encryption {
            Some(encryption) => format!(
                "\nits result is encrypted to {}{}",
                encryption.recipient,
                key_hint(&spec, posted.jobId)
            ),
            None => String::new(),
        };
        format!(
            "job {} posted: bounty {}{from_credits}, result due by {} (tx {tx})\n\
             follow it with `gantry job watch {}`{encrypted}",
            posted.jobId,
            money.show(bounty),
            units::format_time(deadline),
            posted.jobId
        )
    });
    Ok(())
}

/// What the user must do for a job whose inputs need the job key: keep something
/// releasing it while the job is placed (a node waits only seconds for it).
fn key_hint(spec: &JobSpec, job_id: u64) -> String {
    if !spec.needs_job_key() {
        return String::new();
    }
    format!(
        "\nits encrypted inputs need the job key: it is released to the node assigned the job \
         by `gantry job watch {job_id}` or `gantry keys serve`, keep one running (without it \
         the node gives the job back)"
    )
}

/// Refuses encryption where it cannot hold: a verified job's replicas and referees compare
/// results (and a referee re-runs the job) that only the submitter could read; a spec file
/// that already says whom it is encrypted to is not encrypted again.
fn check_encryptable(spec: &JobSpec, encrypt: bool, verified: bool) -> Result<()> {
    let flag = match (encrypt, &spec.encryption) {
        (false, None) => return Ok(()),
        (true, Some(_)) => {
            return Err(CliError::usage(
                "--encrypt: the spec file already has its `encryption`; leave out --encrypt, \
                 --recipient and --secret-input, or take it out of the file",
            ));
        }
        (true, None) => "--encrypt",
        (false, Some(_)) => "the spec's encryption",
    };
    if verified {
        return Err(CliError::usage(format!(
            "{flag}: a verified job cannot be encrypted (its replicas and referees compare \
             results only you could read): use --verify none"
        )));
    }
    Ok(())
}

/// Refuses encrypted inputs on an attempt too short for a node whose key never comes to
/// give the job back for free (its reject grace, a tenth of maxRuntime up to 30 s, must be
/// whole: [`MIN_ENCRYPTED_RUNTIME_SECS`]).
fn check_key_runtime(needs_key: bool, max_runtime: u32, from_file: bool) -> Result<()> {
    if !needs_key || u64::from(max_runtime) >= MIN_ENCRYPTED_RUNTIME_SECS {
        return Ok(());
    }
    // A built spec's --duration is its timeout, the attempt's maxRuntime adds the setup.
    let least = if from_file {
        MIN_ENCRYPTED_RUNTIME_SECS
    } else {
        MIN_ENCRYPTED_RUNTIME_SECS - SETUP_ALLOWANCE_SECS
    };
    Err(CliError::usage(format!(
        "--secret-input: a job with encrypted inputs needs a maxRuntime of at least {} (so \
         that a node whose key never comes gives it back for free), this one's is {}: give \
         --duration {} or more",
        units::format_secs(MIN_ENCRYPTED_RUNTIME_SECS),
        units::format_secs(u64::from(max_runtime)),
        units::format_secs(least)
    )))
}

/// Adds the spec's `encryption` (the result to `recipient`, else to the job's result key
/// derived from the user's identity; a job
/// key derived from the user's identity and a fresh salt) and the secret inputs, each
/// encrypted to the job key: what is to be uploaded.
async fn encrypt_spec(
    ctx: &Context,
    spec: &mut JobSpec,
    recipient: Option<AgeRecipient>,
    secret_inputs: Vec<SecretInput>,
) -> Result<Vec<SealedInput>> {
    let identity = ctx.identity().await?;
    let salt: [u8; KEY_SALT_BYTES] = rand::random();
    // By default the job's own result key (derived, never released to a node): its secret
    // opens this result only, what the user may show an arbiter in a dispute.
    let recipient = recipient
        .unwrap_or_else(|| encryption::result_identity(&identity.identity, &salt).to_public());
    let job_key = encryption::job_identity(&identity.identity, &salt).to_public();
    spec.version = spec.version.max(ENCRYPTED_SPEC_VERSION);
    spec.encryption = Some(Encryption {
        recipient: recipient.to_string(),
        job_key: Some(job_key.to_string()),
        key_salt: Some(alloy::hex::encode(salt)),
    });
    if secret_inputs.is_empty() {
        return Ok(Vec::new());
    }
    let chain_id = ctx.chain().await?.chain_id;
    let mut sealed_inputs = Vec::with_capacity(secret_inputs.len());
    for input in secret_inputs {
        let to = job_key.clone();
        let file = input.file.clone();
        let sealed = tokio::task::spawn_blocking(move || identity::seal_file(&file, &to))
            .await
            .map_err(|e| CliError::Other(format!("encrypting {}: {e}", input.file.display())))??;
        let sha256 = alloy::hex::encode(sealed.sha256);
        let uri = secret_input_uri(chain_id, &sha256);
        spec.inputs.push(InputSpec {
            uri: uri.clone(),
            sha256: Some(sha256),
            path: input.path.clone(),
            max_bytes: None,
            encrypted: true,
        });
        sealed_inputs.push(SealedInput {
            path: input.path,
            uri,
            sealed,
        });
    }
    Ok(sealed_inputs)
}

/// What a verified job may be (design 18, §1): deterministic WASM, or a CPU Docker job
/// replicated (deterministic by the submitter's word; a seat apart from the quorum is not
/// slashed). Refereed Docker and GPU jobs are refused on chain: said here first.
fn check_verifiable(
    spec: &JobSpec,
    verify: &gantry_protocol::market::Verification,
    args: &SubmitArgs,
) -> Result<()> {
    use gantry_protocol::market::Verification;
    match spec.engine {
        Engine::Wasm if spec.wasm.as_ref().is_some_and(|w| w.deterministic) => Ok(()),
        Engine::Wasm => Err(CliError::usage(
            "--verify: a verified WASM job runs deterministically (--memory … --deterministic, \
             or a spec file saying so): every node must compute the same result",
        )),
        Engine::Docker if verify.tier != Verification::REPLICATED => Err(CliError::usage(
            "--verify: a Docker job is verified by replication only (replicated:N/K): a \
             referee could not tell a lying provider from a container that is not \
             deterministic; for disputes by re-execution use --wasm … --deterministic",
        )),
        Engine::Docker
            if args.gpu.as_deref().is_some_and(|g| g != "any")
                || args.gpu_model.is_some()
                || args.gpus.is_some_and(|n| n > 0) =>
        {
            Err(CliError::usage(
                "--verify: a verified Docker job runs on the CPU, in the nodes' deterministic \
                 sandbox: leave out --gpu and --gpus",
            ))
        }
        Engine::Docker => Ok(()),
    }
}

/// A spec file (or stdin for `-`), validated as the worker will.
/// The attempt's `maxRuntime`: the spec's timeout plus the setup allowance, or a spec
/// file's `--duration` if it leaves at least that. A verified job's seats need more (design
/// 18's fit rule: its fuel at the rate every seat is sure of, and at least
/// [`MIN_VERIFIED_RUNTIME`]); a shorter one is declined by every node.
fn max_runtime(args: &SubmitArgs, spec: &JobSpec, from_file: bool, verified: bool) -> Result<u32> {
    let least = if verified {
        spec.verified_runtime()
            .map_err(|e| CliError::usage(format!("--verify: {e}")))?
            .max(MIN_VERIFIED_RUNTIME)
    } else {
        runtime_for(spec.timeout_secs)
    };
    let runtime = match (&args.duration, from_file) {
        (Some(text), true) => units::parse_duration_secs(text)
            .map_err(|e| CliError::usage(format!("--duration: {e}")))?,
        _ => least,
    };
    if runtime < least && verified {
        let why = spec
            .verified_fit(runtime)
            .err()
            .unwrap_or_else(|| format!("a verified job runs at least {MIN_VERIFIED_RUNTIME} s"));
        return Err(CliError::usage(format!(
            "--duration {}: {why}: give at least {}",
            units::format_secs(runtime),
            units::format_secs(least)
        )));
    }
    if runtime < least {
        return Err(CliError::usage(format!(
            "--duration {} leaves the job less than its timeoutSecs ({}) plus {} to fetch its \
             inputs, start and answer: give at least {}",
            units::format_secs(runtime),
            units::format_secs(spec.timeout_secs),
            units::format_secs(SETUP_ALLOWANCE_SECS),
            units::format_secs(least)
        )));
    }
    u32::try_from(runtime)
        .map_err(|_| CliError::usage("--duration: longer than the contract's ~136 years"))
}

/// The shortest run the market takes for a verified job (`VerificationBase`'s
/// `MIN_VERIFIED_RUNTIME`: ten reject graces).
const MIN_VERIFIED_RUNTIME: u64 = 300;

fn read_spec(path: &std::path::Path) -> Result<JobSpec> {
    let bytes = if path.as_os_str() == "-" {
        let mut buffer = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buffer)
            .map_err(|e| CliError::io("stdin", e))?;
        buffer
    } else {
        std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                CliError::usage(format!("{}: no such spec file", path.display()))
            }
            _ => CliError::io(path.display(), e),
        })?
    };
    // A file may be pretty-printed; the size limit is the posted (compact) form's.
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| CliError::usage(format!("{}: not JSON: {e}", path.display())))?;
    let compact = serde_json::to_vec(&value).expect("JSON re-serializes");
    JobSpec::from_slice(&compact).map_err(|e| CliError::usage(format!("{}: {e}", path.display())))
}

/// The spec from --image, --kind, --env, --input, --output-path and the command.
fn build_spec(args: &SubmitArgs, module: Option<ModuleSpec>) -> Result<JobSpec> {
    let (image, engine, wasm) = match module {
        Some(module) => {
            let memory_mib = args
                .memory
                .as_deref()
                .map(units::parse_size_mib)
                .transpose()
                .map_err(|e| CliError::usage(format!("--memory: {e}")))?;
            let wasm = WasmSpec {
                module,
                entry: args.entry.clone(),
                memory_mib,
                deterministic: args.deterministic,
            };
            (String::new(), Engine::Wasm, Some(wasm))
        }
        None => {
            let image = args
                .image
                .clone()
                .ok_or_else(|| CliError::usage("a job needs a spec file, --image or --wasm"))?;
            (image, Engine::Docker, None)
        }
    };
    let mut env = BTreeMap::new();
    for pair in &args.envs {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| CliError::usage(format!("--env {pair}: write NAME=VALUE")))?;
        env.insert(name.to_owned(), value.to_owned());
    }
    let inputs = args
        .inputs
        .iter()
        .map(|input| parse_input(input))
        .collect::<Result<Vec<_>>>()?;
    let timeout_secs = match &args.duration {
        Some(text) => units::parse_duration_secs(text)
            .map_err(|e| CliError::usage(format!("--duration: {e}")))?,
        None => DEFAULT_DURATION,
    };
    let spec = JobSpec {
        version: SPEC_VERSION,
        kind: match args.kind {
            Kind::Training => JobKind::Training,
            Kind::Inference => JobKind::Inference,
        },
        image,
        command: args.command.clone(),
        env,
        inputs,
        outputs: OutputSpec {
            path: args.output_path.clone(),
            max_bytes: None,
        },
        resources: Resources::default(),
        timeout_secs,
        engine,
        wasm,
        encryption: None,
    };
    Ok(spec)
}

/// A WASM job's module, as `--wasm` names it.
#[derive(Debug)]
enum Module {
    /// A local file, uploaded under its SHA-256 (hex) before the job is posted.
    File { bytes: Vec<u8>, sha256: String },
    /// Where the network fetches it, with its digest.
    Uri(ModuleSpec),
}

impl Module {
    fn parse(text: &str) -> Result<Self> {
        if text.contains("://") {
            let (uri, sha256) = text.rsplit_once("#sha256=").ok_or_else(|| {
                CliError::usage(format!(
                    "--wasm {text}: a module URI needs its digest: URI#sha256=HEX"
                ))
            })?;
            return Ok(Self::Uri(ModuleSpec {
                uri: uri.to_owned(),
                sha256: sha256.to_ascii_lowercase(),
                max_bytes: None,
            }));
        }
        let path = std::path::Path::new(text);
        let size = std::fs::metadata(path)
            .map_err(|e| CliError::usage(format!("--wasm {text}: {e}")))?
            .len();
        if size > MAX_WASM_MODULE_BYTES {
            return Err(CliError::usage(format!(
                "--wasm {text}: {size} bytes; workers fetch modules of at most {MAX_WASM_MODULE_BYTES}"
            )));
        }
        let bytes =
            std::fs::read(path).map_err(|e| CliError::usage(format!("--wasm {text}: {e}")))?;
        let sha256 = alloy::hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
        Ok(Self::File { bytes, sha256 })
    }
}

/// Where a module uploaded by this CLI lives: the chain's inputs bucket, under its digest
/// (the same module is stored once, whoever uploads it).
fn module_uri(chain_id: u64, sha256: &str) -> String {
    format!("nats://{}/wasm-{sha256}", names::inputs_bucket(chain_id))
}

/// Where a secret input uploaded by this CLI lives: the chain's inputs bucket, under its
/// ciphertext's digest (a fresh encryption each time: never another's object).
fn secret_input_uri(chain_id: u64, sha256: &str) -> String {
    format!(
        "nats://{}/input-{sha256}{}",
        names::inputs_bucket(chain_id),
        encryption::AGE_SUFFIX
    )
}

/// A `--secret-input PATH=FILE`.
#[derive(Debug, PartialEq, Eq)]
struct SecretInput {
    /// Where the job sees it (below /inputs).
    path: String,
    /// The local file.
    file: PathBuf,
}

impl SecretInput {
    fn parse(text: &str) -> Result<Self> {
        let (path, file) = text
            .split_once('=')
            .filter(|(path, file)| !path.is_empty() && !file.is_empty())
            .ok_or_else(|| CliError::usage(format!("--secret-input {text}: write PATH=FILE")))?;
        let metadata = std::fs::metadata(file)
            .map_err(|e| CliError::usage(format!("--secret-input {text}: {file}: {e}")))?;
        if !metadata.is_file() {
            return Err(CliError::usage(format!(
                "--secret-input {text}: {file} is not a file"
            )));
        }
        let path = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("{INPUTS_DIR}/{path}")
        };
        Ok(Self {
            path,
            file: PathBuf::from(file),
        })
    }
}

/// A secret input encrypted to the job key, and where it is uploaded.
#[derive(Debug)]
struct SealedInput {
    path: String,
    uri: String,
    sealed: Sealed,
}

/// Puts `body` at `uri` (a [`module_uri`] or a [`secret_input_uri`]); `what` names it in
/// an error.
async fn upload(
    nats_url: &str,
    uri: &str,
    body: &mut (impl tokio::io::AsyncRead + Unpin),
    what: &str,
) -> Result<()> {
    use async_nats::jetstream::object_store;
    let (bucket, key) = uri
        .strip_prefix("nats://")
        .and_then(|rest| rest.split_once('/'))
        .expect("an input URI this CLI made");
    let unavailable = |step: &str, e: &dyn std::fmt::Display| {
        CliError::Unavailable(format!("uploading {what}: {step}: {e}"))
    };
    let js = crate::results::jetstream(nats_url).await?;
    let store = match js.get_object_store(bucket).await {
        Ok(store) => store,
        Err(_) => js
            .create_object_store(object_store::Config {
                bucket: bucket.to_owned(),
                description: Some("inputs of this chain's jobs: nats:// URIs".into()),
                ..Default::default()
            })
            .await
            .map_err(|e| unavailable("creating the inputs bucket", &e))?,
    };
    // Put every time, over whatever is there: an object under this digest's name that
    // someone else wrote need not hold these bytes (the worker would refuse it, and the
    // job would fail on it).
    store
        .put(key, body)
        .await
        .map_err(|e| unavailable("writing it", &e))?;
    Ok(())
}

/// `PATH=URI[#sha256=HEX]`; a relative path goes under /inputs.
fn parse_input(text: &str) -> Result<InputSpec> {
    let (path, rest) = text
        .split_once('=')
        .ok_or_else(|| CliError::usage(format!("--input {text}: write PATH=URI[#sha256=HEX]")))?;
    let (uri, sha256) = match rest.rsplit_once("#sha256=") {
        Some((uri, hash)) => (uri, Some(hash.to_ascii_lowercase())),
        None => (rest, None),
    };
    let path = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{INPUTS_DIR}/{path}")
    };
    Ok(InputSpec {
        uri: uri.to_owned(),
        sha256,
        path,
        max_bytes: None,
        encrypted: false,
    })
}

/// Blocks a posting waits for: `--confirmations`, else 1 on the dev chain and 2 elsewhere.
fn confirmations(args: &SubmitArgs, chain: &chain::Chain) -> u64 {
    args.confirmations
        .unwrap_or(if chain.chain_id == chain::DEV_CHAIN_ID {
            1
        } else {
            2
        })
}

/// `--verify`'s policy, as the JSON output shows it.
fn verify_json(verify: &gantry_protocol::market::Verification) -> serde_json::Value {
    use gantry_protocol::market::Verification;
    match verify.tier {
        Verification::REPLICATED => serde_json::json!({
            "tier": "replicated", "size": verify.size, "quorum": verify.quorum,
            "revealWindow": verify.reveal_window,
        }),
        Verification::REFEREED => serde_json::json!({
            "tier": "refereed", "size": verify.size, "revealWindow": verify.reveal_window,
        }),
        _ => serde_json::json!({ "tier": "none" }),
    }
}

/// Posts a verified job (`postVerifiedJob`): the escrow is pulled with an approval (no
/// permit variant), after the submitter's credits.
#[allow(clippy::too_many_arguments)]
async fn post_verified(
    ctx: &Context,
    chain: &chain::Chain,
    args: &SubmitArgs,
    requirements: JobMarket::JobRequirements,
    verify: &gantry_protocol::market::Verification,
    (bounty, deadline, spec_bytes): (U96, u64, Vec<u8>),
    pulled: U256,
    money: &Money,
    described: String,
) -> Result<()> {
    use gantry_protocol::bindings::Verification;
    let market = *chain.market.address();
    if !pulled.is_zero() {
        chain.approve_if_short(market, pulled).await?;
    }
    let r = requirements;
    let requirements = Verification::JobRequirements {
        gpuModel: r.gpuModel,
        minGpuCount: r.minGpuCount,
        minVramMiB: r.minVramMiB,
        minCpuCores: r.minCpuCores,
        minRamMiB: r.minRamMiB,
        maxPricePerGpuHour: r.maxPricePerGpuHour,
        maxRuntime: r.maxRuntime,
        priority: r.priority,
        engine: r.engine,
    };
    let policy = Verification::VerifyPolicy {
        tier: verify.tier,
        size: verify.size,
        quorum: verify.quorum,
        revealWindow: verify.reveal_window,
    };
    let receipt = chain
        .send(
            "postVerifiedJob",
            chain.verification.postVerifiedJob(
                requirements,
                policy,
                bounty,
                U40::from(deadline),
                spec_bytes.into(),
            ),
        )
        .await?;
    let confirmations = confirmations(args, chain);
    let receipt = chain
        .confirmed("postVerifiedJob", receipt, confirmations)
        .await?;
    let posted: JobMarket::JobPosted = chain::logged(&receipt)?;
    let tx = receipt.transaction_hash;
    let json = serde_json::json!({
        "jobId": posted.jobId,
        "tx": tx,
        "fromCredits": posted.fromCredits.to_string(),
        "block": receipt.block_number,
        "confirmations": confirmations,
        "verify": verify_json(verify),
    });
    ctx.say(json, || {
        format!(
            "job {} posted: bounty {}, {described}; result due by {} (tx {tx})\n\
             follow it with `gantry job watch {}`",
            posted.jobId,
            money.show(bounty),
            units::format_time(deadline),
            posted.jobId
        )
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_is_a_uri_with_its_digest_or_a_local_file_hashed() {
        let Module::Uri(spec) = Module::parse("https://host/m.wasm#sha256=AB12").unwrap() else {
            panic!("a URI")
        };
        assert_eq!(
            (spec.uri.as_str(), spec.sha256.as_str()),
            ("https://host/m.wasm", "ab12")
        );
        let error = Module::parse("https://host/m.wasm").unwrap_err();
        assert!(error.to_string().contains("URI#sha256=HEX"), "{error}");
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), b"(module)").unwrap();
        let Module::File { bytes, sha256 } = Module::parse(file.path().to_str().unwrap()).unwrap()
        else {
            panic!("a file")
        };
        assert_eq!(bytes, b"(module)");
        assert_eq!(
            sha256,
            alloy::hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"(module)"))
        );
        assert_eq!(
            module_uri(31337, &sha256),
            format!("nats://gantry_31337_inputs/wasm-{sha256}")
        );
        assert!(Module::parse("/no/such/module.wasm").is_err());
    }

    #[test]
    fn encrypted_secret_inputs_are_local_files_put_below_inputs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data.tar");
        std::fs::write(&file, b"secret").unwrap();
        let file_text = file.display().to_string();
        let input = SecretInput::parse(&format!("data.tar={file_text}")).unwrap();
        assert_eq!(
            input,
            SecretInput {
                path: "/inputs/data.tar".into(),
                file: file.clone()
            }
        );
        let input = SecretInput::parse(&format!("/inputs/x/y={file_text}")).unwrap();
        assert_eq!(input.path, "/inputs/x/y");
        for (text, message) in [
            ("no-equals".to_owned(), "write PATH=FILE"),
            (format!("={file_text}"), "write PATH=FILE"),
            ("x=".to_owned(), "write PATH=FILE"),
            ("x=/no/such/file".to_owned(), "/no/such/file"),
            (format!("x={}", dir.path().display()), "is not a file"),
        ] {
            let error = SecretInput::parse(&text).unwrap_err();
            assert_eq!(error.exit_code(), crate::error::exit::USAGE, "{text}");
            assert!(error.to_string().contains(message), "{text}: {error}");
        }
        let sha = "ab".repeat(32);
        assert_eq!(
            secret_input_uri(31337, &sha),
            format!("nats://gantry_31337_inputs/input-{sha}.age")
        );
    }

    fn spec() -> JobSpec {
        JobSpec::from_slice(
            br#"{"version":3,"image":"busybox","command":["true"],"outputs":{},"timeoutSecs":60}"#,
        )
        .unwrap()
    }

    #[test]
    fn encrypted_jobs_are_refused_when_verified_or_already_encrypted() {
        let plain = spec();
        check_encryptable(&plain, false, true).unwrap();
        check_encryptable(&plain, true, false).unwrap();
        let error = check_encryptable(&plain, true, true).unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit::USAGE);
        assert!(
            error
                .to_string()
                .starts_with("--encrypt: a verified job cannot be encrypted"),
            "{error}"
        );
        let mut encrypted = spec();
        encrypted.encryption = Some(Encryption {
            recipient: gantry_protocol::encryption::AgeIdentity::generate()
                .to_public()
                .to_string(),
            job_key: None,
            key_salt: None,
        });
        check_encryptable(&encrypted, false, false).unwrap();
        let error = check_encryptable(&encrypted, false, true).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the spec's encryption: a verified job"),
            "{error}"
        );
        let error = check_encryptable(&encrypted, true, false).unwrap_err();
        assert!(
            error.to_string().contains("already has its `encryption`"),
            "{error}"
        );
    }

    #[test]
    fn encrypted_inputs_need_an_attempt_long_enough_to_give_back_for_free() {
        check_key_runtime(false, 60, false).unwrap();
        check_key_runtime(true, 300, false).unwrap();
        check_key_runtime(true, 300, true).unwrap();
        let error = check_key_runtime(true, 180, false).unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit::USAGE);
        assert_eq!(
            error.to_string(),
            "--secret-input: a job with encrypted inputs needs a maxRuntime of at least 5m (so \
             that a node whose key never comes gives it back for free), this one's is 3m: give \
             --duration 3m or more"
        );
        let error = check_key_runtime(true, 299, true).unwrap_err();
        assert!(
            error.to_string().ends_with("give --duration 5m or more"),
            "{error}"
        );
    }

    #[test]
    fn inputs_from_flags() {
        let input = parse_input("data.tar=https://host/d.tar#sha256=AB12").unwrap();
        assert_eq!(input.path, "/inputs/data.tar");
        assert_eq!(input.uri, "https://host/d.tar");
        assert_eq!(input.sha256.as_deref(), Some("ab12"));
        let plain = parse_input("/inputs/x=nats://b/k").unwrap();
        assert_eq!(
            (plain.path.as_str(), plain.uri.as_str()),
            ("/inputs/x", "nats://b/k")
        );
        assert_eq!(plain.sha256, None);
        assert!(parse_input("no-equals").is_err());
    }
}
