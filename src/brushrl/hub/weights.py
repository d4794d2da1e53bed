"""Model weights: fetched once to shared storage, loaded from there with the hub offline.

A GPU config names hub models in several fields (the policy, the judge, HPSv3's checkpoint and its
base VLM, ~160 GB together). Without this module every actor process downloads its model at start,
and a cluster without internet access fails only once an actor starts. Here:

* :func:`models_of` lists the hub models a config names (:class:`ModelRef`: the config field, the
  hub id or local path, the files it needs); ``policy.model: tiny`` names none.
* :func:`fetch_model` downloads one of them with ``huggingface_hub.snapshot_download`` into
  ``<dir>/<org>/<name>/`` (only what serving and training read: :data:`SERVE_PATTERNS`), then writes
  :data:`MARKER` (the revision and each file's size) so that a later check and fetch need no network.
* :func:`local_status` says whether a folder (or file) is ``complete``, ``incomplete`` or ``missing``.
* :func:`resolve_weights` (the driver, before Ray starts) replaces each hub id by its complete local
  copy under ``weights.dir``; when every model is local the actors get ``HF_HUB_OFFLINE=1`` and
  ``TRANSFORMERS_OFFLINE=1`` (:func:`offline_env`); a model neither local nor reachable raises
  :class:`WeightsUnavailable` naming the field, the model and the ``brushrl weights fetch`` command.

HTTP calls (huggingface_hub 2.4, read from its source): ``HfApi.model_info`` is ``GET
{endpoint}/api/models/{repo}[/revision/{rev}]``; ``list_repo_tree`` is ``GET
{endpoint}/api/models/{repo}/tree/{rev}?recursive=True`` (paged by ``Link`` headers);
``snapshot_download`` with a commit hash as revision skips ``model_info`` and lists the tree, then
per file ``hf_hub_download``: ``HEAD`` then ``GET {endpoint}/{repo}/resolve/{rev}/{file}`` (headers
``X-Repo-Commit``, ``ETag``, ``Content-Length``); with ``local_dir`` a file whose
``.cache/huggingface/download/<file>.metadata`` holds that commit is not fetched again.

Only the standard library is imported at module level: :func:`offline_env` is called where actors'
runtime envs are built, and huggingface_hub is needed only to fetch or to ask the hub.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Literal

#: Files serving (vLLM) and training (transformers) read: configs, tokenizer and processor files,
#: chat templates, safetensors weights and their index. Not fetched: ``*.bin``/``*.pth``/``*.pt``
#: duplicates of the weights, ``*.gguf``/``*.onnx`` exports, ``original/`` folders.
SERVE_PATTERNS: tuple[str, ...] = ("*.json", "*.safetensors", "*.jinja", "*.txt", "*.model", "*.tiktoken",
                                   "LICENSE*", "README.md")
#: Paths left out even when a pattern above matches (subfolders of other formats).
SKIP_PATTERNS: tuple[str, ...] = ("original/*", "onnx/*", "gguf/*", ".*")
#: Written into a model's folder after a complete fetch: repo id, revision, file -> size in bytes.
MARKER = ".brushrl-weights.json"
#: HPSv3's checkpoint file in its hub repository (hpsv3/inference.py: ``hf_hub_download("MizzenAI/HPSv3",
#: "HPSv3.safetensors")``) and the base VLM its package YAML names (``HPSv3_7B.yaml`` ``model_name_or_path``).
HPSV3_CHECKPOINT_FILE = "HPSv3.safetensors"
HPSV3_DEFAULT_BASE = "Qwen/Qwen2-VL-7B-Instruct"
#: The hub's offline switches (huggingface_hub and transformers read them), passed on to actors.
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
#: Shipped file lists: ``files/<org>--<name>.json`` (``{"repo_id", "files": {name: bytes | null}, "sources"}``).
FILES_DIR = Path(__file__).parent / "files"

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")

State = Literal["complete", "incomplete", "missing"]


class WeightsUnavailable(RuntimeError):
    """Models a job needs are neither complete locally nor reachable on the hub; the message names
    each model's config field, id and the command that fetches it."""


def is_hub_id(name: str) -> bool:
    """True for ``org/name`` that is not an existing local path (``/models/x``, ``./x`` and ``~/x``
    are paths; so is anything that exists on disk)."""
    if name.startswith(("/", "./", "../", "~")) or Path(name).exists():
        return False
    return bool(_HUB_ID.match(name))


@dataclass(frozen=True)
class ModelRef:
    """One model a config names.

    Attributes:
        field: the dotted config field that names it (what an error message points at).
        name: the hub id or local path as written in the config.
        files: the exact files needed (HPSv3's checkpoint), or None: a model folder
            (:data:`SERVE_PATTERNS`).
        targets: the dotted fields that receive the local path when resolved (usually ``field``;
            HPSv3's checkpoint repo resolves into ``checkpoint_path``; a model two fields name,
            e.g. the policy also used as HPSv3's base, lists both).
    """

    field: str
    name: str
    files: tuple[str, ...] | None = None
    targets: tuple[str, ...] = ()

    @property
    def hub(self) -> bool:
        return is_hub_id(self.name)

    def local_dir(self, weights_dir: str | Path) -> Path:
        """``<weights_dir>/<org>/<name>``: where ``brushrl weights fetch`` puts a hub id."""
        return Path(weights_dir).expanduser() / self.name

    def local_value(self, weights_dir: str | Path) -> str:
        """The config value that loads the local copy: the folder, or the one file of ``files``."""
        folder = self.local_dir(weights_dir)
        return str(folder / self.files[0]) if self.files else str(folder)


def models_of(cfg) -> list[ModelRef]:
    """The models ``cfg`` (a ``BrushRLConfig``) loads, in start order; each model once (the first
    field naming it is shown, every field naming it is resolved: ``targets``). None for
    ``policy.model: tiny``, a judge behind someone else's endpoint, or an unweighted scorer."""
    refs: list[ModelRef] = []
    if cfg.policy.model != "tiny":
        refs.append(ModelRef("policy.model", cfg.policy.model, targets=("policy.model",)))
    judge = cfg.reward.judge
    judge_used = "judge" in cfg.reward.scorers or (cfg.rollout.turns > 1 and cfg.reward.critic.kind == "judge")
    if judge_used and judge.serve is not None:
        fld = "reward.judge.serve.weights" if judge.serve.weights else "reward.judge.model"
        refs.append(ModelRef(fld, judge.serve.weights or judge.model, targets=("reward.judge.serve.weights",)))
    elif judge_used and judge.backend == "transformers":
        refs.append(ModelRef("reward.judge.model", judge.model, targets=("reward.judge.model",)))
    if "hpsv3" in cfg.reward.scorers:
        h = cfg.reward.hpsv3
        if h.checkpoint_path:
            refs.append(ModelRef("reward.hpsv3.checkpoint_path", h.checkpoint_path,
                                 targets=("reward.hpsv3.checkpoint_path",)))
        else:
            refs.append(ModelRef("reward.hpsv3.checkpoint_repo", h.checkpoint_repo, (HPSV3_CHECKPOINT_FILE,),
                                 targets=("reward.hpsv3.checkpoint_path",)))
        base_field = "reward.hpsv3.base_model" if h.base_model else "reward.hpsv3.config_path"
        refs.append(ModelRef(base_field, hpsv3_base(h), targets=("reward.hpsv3.base_model",)))
    merged: dict[tuple, ModelRef] = {}
    for ref in refs:  # one fetch and one row a model; every field naming it still gets its local path
        key = (ref.name, ref.files)
        first = merged.get(key)
        merged[key] = ref if first is None else ModelRef(first.field, first.name, first.files,
                                                         first.targets + ref.targets)
    return list(merged.values())


def hpsv3_base(h) -> str:
    """HPSv3's base VLM for an ``HPSv3Config``: ``base_model``, else ``model_name_or_path`` of
    ``config_path`` (unreadable: :data:`HPSV3_DEFAULT_BASE`, as the package's YAML names)."""
    if h.base_model:
        return h.base_model
    if not h.config_path:
        return HPSV3_DEFAULT_BASE
    import yaml

    try:
        return str((yaml.safe_load(Path(h.config_path).read_text()) or {}).get("model_name_or_path")
                   or HPSV3_DEFAULT_BASE)
    except OSError:
        return HPSV3_DEFAULT_BASE


# ----------------------------------------------------------------------------- local state
@dataclass(frozen=True)
class LocalStatus:
    """A model's local copy.

    Attributes:
        state: ``complete``, ``incomplete`` or ``missing``.
        path: the folder or file looked at (None: no weights dir to look in).
        detail: why it is not complete (files missing or of the wrong size), or what was checked.
        size: bytes of the needed files present.
    """

    state: State
    path: Path | None
    detail: str = ""
    size: int = 0


def shipped_files(repo_id: str) -> dict[str, int | None] | None:
    """The shipped file list of ``repo_id`` (``files/<org>--<name>.json``: file -> bytes, None
    where the size is unknown), or None when none is shipped."""
    path = FILES_DIR / f"{repo_id.replace('/', '--')}.json"
    if not path.is_file():
        return None
    return dict(json.loads(path.read_text())["files"])


def _check_files(folder: Path, expected: dict[str, int | None]) -> tuple[list[str], int]:
    """Problems (``name missing``, ``name: N B, expected M``) and bytes present of ``expected``."""
    problems, size = [], 0
    for name, want in sorted(expected.items()):
        p = folder / name
        if not p.is_file():
            problems.append(f"{name} missing")
            continue
        have = p.stat().st_size
        size += have
        if want is not None and have != want:
            problems.append(f"{name}: {have} B, expected {want}")
    return problems, size


def _expected_folder_files(folder: Path) -> tuple[dict[str, int | None], str]:
    """What a model folder must hold when it has no :data:`MARKER`: ``config.json`` and the
    weights (every shard of ``model.safetensors.index.json``, else ``model.safetensors``)."""
    expected: dict[str, int | None] = {"config.json": None}
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        expected |= {s: None for s in shards}
        return expected, f"config.json + {len(shards)} shards of model.safetensors.index.json"
    if (folder / "model.safetensors").is_file() or not any(folder.glob("*.safetensors")):
        expected["model.safetensors"] = None
        return expected, "config.json + model.safetensors"
    expected |= {p.name: None for p in folder.glob("*.safetensors")}
    return expected, "config.json + its safetensors"


def local_status(path: str | Path, files: tuple[str, ...] | None = None,
                 shipped: dict[str, int | None] | None = None) -> LocalStatus:
    """Whether the model at ``path`` is complete.

    A folder fetched by :func:`fetch_model` is checked against its :data:`MARKER` (every file
    present with its size). Any other folder must hold ``config.json`` and every shard its
    ``model.safetensors.index.json`` names (or ``model.safetensors``). ``files`` (HPSv3's
    checkpoint) names the exact files instead. ``shipped`` sizes, where known, are checked too.
    Reads file sizes only (no hashing, no network).
    """
    path = Path(path).expanduser()
    if files and path.is_file():  # a checkpoint given as the file itself
        return LocalStatus("complete", path, "file", path.stat().st_size)
    if not path.is_dir():
        return LocalStatus("missing", path, "not there")
    marker = path / MARKER
    if files:
        expected = {f: (shipped or {}).get(f) for f in files}
        what = ", ".join(files)
    elif marker.is_file():
        expected, what = dict(json.loads(marker.read_text())["files"]), f"the {MARKER} file list"
    else:
        expected, what = _expected_folder_files(path)
    for name, size in (shipped or {}).items():  # a shipped size is a check, never a new file
        if name in expected and expected[name] is None:
            expected[name] = size
    problems, size = _check_files(path, expected)
    if problems:
        shown = "; ".join(problems[:3]) + (f"; {len(problems) - 3} more" if len(problems) > 3 else "")
        return LocalStatus("incomplete", path, shown, size)
    return LocalStatus("complete", path, what, size)


def ref_status(ref: ModelRef, weights_dir: str | Path | None) -> LocalStatus:
    """:func:`local_status` of a reference: a local path as written, a hub id under ``weights_dir``
    (``missing`` with path None when there is no weights dir)."""
    if not ref.hub:
        path = Path(ref.name).expanduser()
        if path.is_file():  # a checkpoint file given directly (reward.hpsv3.checkpoint_path)
            return LocalStatus("complete", path, "file", path.stat().st_size)
        return local_status(path, ref.files)
    if weights_dir is None:
        return LocalStatus("missing", None, "weights.dir not set")
    return local_status(ref.local_dir(weights_dir), ref.files, shipped_files(ref.name))


# ----------------------------------------------------------------------------- the hub
def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` set to a true value (huggingface_hub's own reading: 1/ON/YES/TRUE)."""
    return os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")


def offline_env() -> dict[str, str]:
    """The hub's offline switches set in this process (:data:`OFFLINE_VARS`), for an actor's
    ``runtime_env`` ``env_vars``: actors of a submitted job do not inherit the driver's environment,
    and :func:`resolve_weights` sets these in the driver when every model is local."""
    return {k: os.environ[k] for k in OFFLINE_VARS if k in os.environ}


def hub_reason(repo_id: str, endpoint: str | None = None, timeout_s: float = 5.0) -> str | None:
    """None when the hub answers ``HfApi.model_info(repo_id)`` within ``timeout_s`` seconds, else
    why not (``HF_HUB_OFFLINE is set``, the exception). One cheap metadata request, no files."""
    if hub_offline():
        return "HF_HUB_OFFLINE is set"
    try:
        from huggingface_hub import HfApi

        HfApi(endpoint=endpoint).model_info(repo_id, timeout=timeout_s)
        return None
    except Exception as exc:  # noqa: BLE001 - no network, DNS, 401 gated, 404: all unreachable for us
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}".rstrip(": ")


@dataclass(frozen=True)
class RemoteFile:
    """One file a fetch would download: its path in the repo and size in bytes (None: unknown)."""

    path: str
    size: int | None


@dataclass(frozen=True)
class Listing:
    """The files of one model to fetch.

    Attributes:
        files: what a fetch downloads.
        revision: the commit the hub listed (None for a shipped list).
        source: ``hub`` (listed by the hub) or ``shipped`` (``files/*.json``) or ``none``.
    """

    files: tuple[RemoteFile, ...]
    revision: str | None
    source: Literal["hub", "shipped", "none"]

    @property
    def size(self) -> int | None:
        """Total bytes; None when any size is unknown."""
        sizes = [f.size for f in self.files]
        return None if not sizes or None in sizes else sum(sizes)  # type: ignore[arg-type]


def wanted(path: str, files: tuple[str, ...] | None) -> bool:
    """Whether a repo file is fetched: one of ``files`` when given, else a :data:`SERVE_PATTERNS`
    match outside :data:`SKIP_PATTERNS`."""
    if files is not None:
        return path in files
    if any(fnmatch.fnmatch(path, p) for p in SKIP_PATTERNS):
        return False
    return any(fnmatch.fnmatch(path.rsplit("/", 1)[-1], p) for p in SERVE_PATTERNS)


def hub_listing(ref: ModelRef, endpoint: str | None = None, timeout_s: float = 10.0) -> Listing:
    """The files of ``ref`` on the hub at its current revision (``model_info`` for the commit, then
    ``list_repo_tree`` at it).

    Raises:
        huggingface_hub.errors.HfHubHTTPError, httpx errors: the hub did not answer.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=endpoint)
    sha = api.model_info(ref.name, timeout=timeout_s).sha
    entries = api.list_repo_tree(ref.name, recursive=True, revision=sha)
    files = tuple(RemoteFile(e.path, e.size) for e in entries if isinstance(e, RepoFile) and wanted(e.path, ref.files))
    return Listing(files, sha, "hub")


def shipped_listing(ref: ModelRef) -> Listing:
    """The shipped file list of ``ref`` (``source`` ``none`` and no files when none is shipped)."""
    shipped = shipped_files(ref.name)
    if shipped is None:
        return Listing((), None, "none")
    return Listing(tuple(RemoteFile(p, s) for p, s in sorted(shipped.items()) if wanted(p, ref.files)), None, "shipped")


def fetch_model(ref: ModelRef, weights_dir: str | Path, endpoint: str | None = None, listing: Listing | None = None,
                say: Callable[[str], None] = print) -> LocalStatus:
    """Download ``ref`` (a hub id) into ``<weights_dir>/<org>/<name>/`` and write its :data:`MARKER`.

    A folder already complete against the hub's listing downloads nothing (huggingface_hub keeps
    per-file metadata under ``.cache/huggingface`` in the folder). Progress: huggingface_hub's bars
    on stderr, a line per model from ``say``.

    Raises:
        RuntimeError: the repository has none of the files wanted (e.g. only ``.bin`` weights), or a
            file is missing or of another size than listed after the download.
        huggingface_hub / httpx errors: the hub did not answer.
    """
    from huggingface_hub import snapshot_download

    listing = listing or hub_listing(ref, endpoint)
    if not listing.files:  # an empty marker would read as complete
        want = ", ".join(ref.files) if ref.files else " ".join(SERVE_PATTERNS)
        raise RuntimeError(f"{ref.name}: the hub lists none of the files wanted ({want})")
    dest = ref.local_dir(weights_dir)
    t0 = time.monotonic()
    # cache_dir: huggingface_hub keeps refs and tree listings there even with local_dir; inside the
    # model's folder they never land in the home directory of whoever fetches.
    snapshot_download(ref.name, revision=listing.revision, local_dir=str(dest), endpoint=endpoint,
                      allow_patterns=[f.path for f in listing.files], cache_dir=str(dest / ".cache" / "hub"))
    expected = {f.path: f.size for f in listing.files}
    problems, size = _check_files(dest, expected)
    if problems:
        raise RuntimeError(f"{ref.name}: incomplete after the download into {dest}: {'; '.join(problems[:5])}")
    (dest / MARKER).write_text(json.dumps({"repo_id": ref.name, "revision": listing.revision, "files": expected},
                                          indent=1, sort_keys=True))
    say(f"  {ref.name}: {len(expected)} files, {human_size(size)} in {dest} ({time.monotonic() - t0:.1f} s)")
    return LocalStatus("complete", dest, f"the {MARKER} file list", size)


def human_size(n: int | None) -> str:
    """Bytes as ``12.3 GiB`` (binary units); ``unknown`` for None."""
    if n is None:
        return "unknown"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


# ----------------------------------------------------------------------------- the driver
@dataclass
class Resolved:
    """What :func:`resolve_weights` decided.

    Attributes:
        cfg: the config with each hub id found complete under ``weights.dir`` replaced by its path.
        env: environment variables for the driver and every actor (the offline switches when every
            model is local; empty otherwise).
        notes: one line per model (for the job log); empty when the config names no model.
    """

    cfg: object
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def fetch_command(config: str, weights_dir: str | None, repo_ids: Iterable[str]) -> str:
    """The command that fetches ``repo_ids`` of ``config``."""
    only = "".join(f" --only {r}" for r in repo_ids)
    return f"brushrl weights fetch {config} --to {weights_dir or 'DIR'}{only}"


def resolve_weights(cfg, config: str, reason: Callable[[str], str | None] | None = None) -> Resolved:
    """Turn the hub ids of ``cfg`` into local paths before any actor starts.

    Each model of :func:`models_of`: a local path must be complete; a hub id complete under
    ``weights.dir`` becomes that path (in each of ``ModelRef.targets``); any other hub id stays and its actor
    downloads it at start, if the hub answers (``reason``, default :func:`hub_reason`) and
    ``weights.require_local`` is off. Every model local: ``env`` holds the offline switches.
    ``config`` is the config file's path as the user gave it (for the fetch command). A config that
    names no model (``policy.model: tiny``, CPU scorers) costs nothing: no file or network access.

    Raises:
        WeightsUnavailable: naming each model that is neither usable locally nor allowed/reachable
            from the hub: its field, id, what is wrong and the ``brushrl weights fetch`` command.
    """
    refs = models_of(cfg)
    if not refs:
        return Resolved(cfg)
    wcfg = cfg.weights
    wdir = str(Path(wcfg.dir).expanduser()) if wcfg.dir else None
    # HF_ENDPOINT read now (huggingface_hub reads it once, at import): a mirror set for the job counts.
    endpoint = os.environ.get("HF_ENDPOINT") or None
    reason = reason or (lambda repo: hub_reason(repo, endpoint, timeout_s=wcfg.check_timeout_s))
    updates, notes, problems, remote, local = {}, [], [], [], 0
    for ref in refs:
        st = ref_status(ref, wdir)
        if st.state == "complete":
            value = ref.local_value(wdir) if ref.hub else ref.name
            updates |= {target: value for target in ref.targets}
            local += 1
            notes.append(f"{ref.field}: {ref.name} -> {value} (complete, {human_size(st.size)})")
        elif not ref.hub:
            problems.append(f"{ref.field}: {ref.name} is {st.state} ({st.detail})")
        elif wcfg.require_local:
            problems.append(f"{ref.field}: {ref.name} is {st.state} in weights.dir {wdir} ({st.detail}) and "
                            "weights.require_local is set")
            remote.append(ref.name)
        else:
            why = reason(ref.name)
            if why is not None:
                where = f"not complete in weights.dir {wdir} ({st.detail})" if wdir else "weights.dir is not set"
                problems.append(f"{ref.field}: {ref.name}: {where} and the hub is unreachable ({why})")
                remote.append(ref.name)
            else:
                notes.append(f"{ref.field}: {ref.name} from the hub (not local: each actor that loads it downloads "
                             f"it; fetch it once: {fetch_command(config, wdir, [ref.name])})")
    if problems:
        every_hub_model = set(remote) == {r.name for r in refs if r.hub}  # then no --only: all of them
        fix = f"\nfetch them first: {fetch_command(config, wdir, [] if every_hub_model else remote)}" if remote else ""
        if remote and not wdir:
            fix += " and set weights.dir to DIR"
        raise WeightsUnavailable("model weights unavailable, no actor started:\n  " + "\n  ".join(problems) + fix)
    resolved = _with_values(cfg, updates)
    return Resolved(resolved, {k: "1" for k in OFFLINE_VARS} if local == len(refs) else {}, notes)


def _with_values(cfg, updates: dict[str, str]):
    """``cfg`` with dotted fields set (validated again, as a copy)."""
    if not updates:
        return cfg
    data = cfg.model_dump()
    for dotted, value in updates.items():
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return type(cfg).model_validate(data)


__all__ = ["HPSV3_CHECKPOINT_FILE", "HPSV3_DEFAULT_BASE", "Listing", "LocalStatus", "MARKER", "ModelRef",
           "Resolved", "SERVE_PATTERNS", "WeightsUnavailable", "fetch_command", "fetch_model", "hub_listing",
           "hub_reason", "human_size", "is_hub_id", "local_status", "models_of", "offline_env", "ref_status",
           "resolve_weights", "shipped_listing"]
