"""Package sources from Debian and npm, through their own clients, into a work folder.

- ``PackageSpec``: ``LANGUAGE:REGISTRY:NAME``, e.g. ``go:debian:golang-github-pkg-errors-dev``. Registries:
  ``debian`` (a binary package that ships source: golang-*-dev, librust-*-dev, ruby-*, php-*, header-only -dev),
  ``debian-source`` (a source package: ``apt-get source --download-only``, then its tarballs), ``npm``
  (``npm pack``).
- ``AptConfig``: apt with a configuration of its own under the cache (sources list with a deb-src line for the
  system's release, package lists, archives), passed as ``-o`` options: the system's apt setup is never touched.
- ``lookup``: version, licence and upstream URLs from the registry, before anything is downloaded (so an excluded
  upstream is refused first); ``fetch`` downloads and unpacks, adding what the package's own files say
  (``debian/copyright``'s ``Source`` and ``License``, ``package.json``'s ``repository``).

Tarballs are unpacked with tarfile's ``data`` filter (no links out of the folder, no device files, no absolute
paths) and only files the miner reads are written.
"""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import zlib
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

REGISTRIES = ("debian", "debian-source", "npm")
DEBIAN_MIRROR = "http://deb.debian.org/debian"  # the mirror the system's own sources use (debian.sources)
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
TOOL_TIMEOUT_S = 900  # one download or unpack; a big source package over a slow link takes minutes
# Tarballs tarfile reads (a source package's .asc signatures and .dsc files are not tarballs)
TARBALL = re.compile(r"\.(tar|tar\.gz|tgz|tar\.bz2|tar\.xz|tar\.lzma)$")
KEPT_METADATA_FILES = ("copyright", "package.json", "metadata")  # metadata: only debian/upstream/metadata is read


class FetchError(RuntimeError):
    """A package could not be looked up or downloaded; the message is one line naming the cause."""


class NetworkError(FetchError):
    """The registry cannot be reached at all: nothing else will work either, so the run stops."""


@dataclass(frozen=True)
class PackageSpec:
    language: str
    registry: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.language}:{self.registry}:{self.name}"

    @classmethod
    def parse(cls, text: str, languages: list[str]) -> PackageSpec:
        """``LANGUAGE:REGISTRY:NAME``; a ValueError names the part that is wrong and the valid values."""
        parts = text.strip().split(":", 2)
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"package {text!r}: write LANGUAGE:REGISTRY:NAME, "
                             "e.g. go:debian:golang-github-pkg-errors-dev")
        language, registry, name = parts
        if language not in languages:
            raise ValueError(f"package {text!r}: unknown language {language!r}; choose one of {', '.join(languages)}")
        if registry not in REGISTRIES:
            raise ValueError(f"package {text!r}: unknown registry {registry!r}; choose one of {', '.join(REGISTRIES)}")
        if not re.fullmatch(r"[@a-z0-9][\w.+@/-]*", name, re.IGNORECASE) or ".." in name:
            raise ValueError(f"package {text!r}: {name!r} is not a package name (letters, digits, . + - _ / @)")
        return cls(language, registry, name)


@dataclass
class PackageInfo:
    """What the registry and the package's files say about it."""

    version: str = ""
    license: str = ""
    upstream_urls: list[str] = field(default_factory=list)


def run_tool(arguments: list[str], cwd: Path | None = None) -> str:
    """stdout of a registry client; a FetchError (NetworkError when the host is unreachable) with its last error
    line otherwise."""
    try:
        result = subprocess.run(arguments, cwd=cwd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                                check=False)
    except FileNotFoundError as error:
        raise NetworkError(f"{arguments[0]} is not installed; install it (apt-get install apt / npm) or leave out "
                           "the packages of that registry") from error
    except subprocess.TimeoutExpired as error:
        raise FetchError(f"{' '.join(arguments[:3])} took over {TOOL_TIMEOUT_S} s") from error
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("W:")]
        message = lines[-1] if lines else f"exit status {result.returncode}"
        if re.search(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|Temporary failure resolving|Could not resolve|"
                     r"Failed to fetch .*InRelease|network is unreachable", result.stderr, re.IGNORECASE):
            raise NetworkError(f"{arguments[0]} cannot reach its registry ({message.strip()}); check the network "
                               "or the proxy, then run the same command again (finished packages are cached)")
        action = " ".join(argument for argument in arguments if not argument.startswith("-") and "=" not in argument)
        raise FetchError(f"{action}: {message.strip()}")
    return result.stdout


def os_release_codename(path: Path = Path("/etc/os-release")) -> str:
    """The system's Debian release (``bookworm``): the deb-src line must name the release the system uses."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    match = re.search(r"^VERSION_CODENAME=\"?(\w+)", text, re.MULTILINE)
    if not match:
        raise NetworkError(f"{path} names no VERSION_CODENAME; pass --debian-release (e.g. bookworm)")
    return match.group(1)


class AptConfig:
    """apt-get and apt-cache run with a configuration kept under ``root``: its own sources list (deb and deb-src
    lines for one release), package lists and archive cache. Nothing of the system's apt setup is read or written
    except the keyring that signs Debian's archive."""

    def __init__(self, root: Path, release: str, mirror: str = DEBIAN_MIRROR):
        self.root = root
        self.release = release
        self.mirror = mirror

    @property
    def options(self) -> list[str]:
        paths = {"Dir::Etc::sourcelist": self.root / "sources.list", "Dir::Etc::sourceparts": self.root / "parts",
                 "Dir::Etc::preferencesparts": self.root / "parts", "Dir::State::Lists": self.root / "lists",
                 "Dir::Cache": self.root / "cache",
                 # named explicitly, apt keeps its parsed lists between calls (3 s less per call, measured)
                 "Dir::Cache::pkgcache": self.root / "cache" / "pkgcache.bin",
                 "Dir::Cache::srcpkgcache": self.root / "cache" / "srcpkgcache.bin"}
        # root may write the downloads itself: apt's `_apt` user cannot enter the cache folder of another user
        return [option for key, value in paths.items() for option in ("-o", f"{key}={value}")] + \
            ["-o", "APT::Sandbox::User=root", "-q"]

    def prepare(self, refresh: bool = False) -> None:
        """Write the configuration and fetch the package lists once (again with ``refresh``)."""
        for folder in ("parts", "lists/partial", "cache/archives/partial"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        signed = f"[signed-by={DEBIAN_KEYRING}] " if Path(DEBIAN_KEYRING).exists() else ""
        (self.root / "sources.list").write_text(
            f"deb {signed}{self.mirror} {self.release} main\ndeb-src {signed}{self.mirror} {self.release} main\n",
            encoding="utf-8")
        if refresh or not any((self.root / "lists").glob("*Sources*")):
            run_tool(["apt-get", *self.options, "update"])
        if not any((self.root / "lists").glob("*Sources*")):  # apt-get update exits 0 when every fetch failed
            raise NetworkError(f"apt-get update fetched no package lists from {self.mirror}; check the network or "
                               "the proxy (or pass --debian-mirror URL), then run the same command again")

    def show(self, name: str, source: bool) -> dict[str, str]:
        """The first stanza of ``apt-cache show`` (``showsrc`` for a source package) as a field -> value map."""
        output = run_tool(["apt-cache", *self.options, "showsrc" if source else "show", "--no-all-versions"
                           if not source else "--only-source", name])
        stanza = output.strip().split("\n\n")[0]
        if not stanza:
            raise FetchError(f"Debian has no {'source ' if source else ''}package {name} in {self.release}")
        return dict(HeaderParser().parsestr(stanza).items())

    def lookup(self, spec: PackageSpec) -> PackageInfo:
        fields = self.show(spec.name, source=spec.registry == "debian-source")
        urls = [value for key, value in fields.items() if key == "Homepage" or key.startswith("Vcs-")]
        if spec.registry == "debian":  # the Vcs fields are the source package's
            source_name = fields.get("Source", spec.name).split()[0]
            try:
                source_fields = self.show(source_name, source=True)
                urls += [value for key, value in source_fields.items() if key == "Homepage" or key.startswith("Vcs-")]
            except FetchError:
                pass  # a binary package whose source stanza is missing still has its Homepage
        return PackageInfo(version=fields.get("Version", ""), upstream_urls=urls)

    def fetch(self, spec: PackageSpec, work: Path, suffixes: tuple[str, ...], info: PackageInfo) -> Path:
        """Download and unpack ``spec`` into ``work/tree``; adds debian/copyright's Source and License to ``info``."""
        download = work / "download"
        download.mkdir(parents=True, exist_ok=True)
        tree = work / "tree"
        if spec.registry == "debian":
            run_tool(["apt-get", *self.options, "download", spec.name], cwd=download)
            for deb in download.glob("*.deb"):
                with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL) as process:
                    unpack(deb, tree, suffixes, stream=process.stdout)
        else:
            try:
                run_tool(["apt-get", *self.options, "source", "--download-only", spec.name], cwd=download)
            except NetworkError:
                raise
            except FetchError as error:
                failure = str(error)  # the upstream tarball alone is enough: debian.tar only adds the copyright
            else:
                failure = ""
            tarballs = sorted(path for path in download.iterdir() if TARBALL.search(path.name))
            if not any(".debian.tar." not in path.name for path in tarballs):
                raise FetchError(f"{spec.name}: no upstream tarball came from the mirror ({failure or 'none listed'})")
            for tarball in tarballs:
                unpack(tarball, tree, suffixes)
        read_copyright(tree, info)
        return tree


def unpack(tarball: Path, destination: Path, suffixes: tuple[str, ...], stream=None) -> None:
    """``extract_members`` of a tarball file (or of ``stream``, a tar stream read from ``tarball``); a damaged or
    unreadable one is a FetchError naming it, so one bad package does not stop the run."""
    try:
        with (tarfile.open(fileobj=stream, mode="r|*") if stream is not None else tarfile.open(tarball)) as archive:
            extract_members(archive, destination, suffixes)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise FetchError(f"{tarball.name} cannot be unpacked ({type(error).__name__}): a damaged download; "
                         "run again to fetch it anew") from error


def extract_members(archive: tarfile.TarFile, destination: Path, suffixes: tuple[str, ...]) -> None:
    """The regular files of ``archive`` that end in ``suffixes`` or are metadata the miner reads, written under
    ``destination`` by tarfile's ``data`` filter (which refuses absolute paths, links out and device files)."""
    destination.mkdir(parents=True, exist_ok=True)
    for member in archive:
        name = member.name.rsplit("/", 1)[-1]
        if member.isfile() and (name.endswith(suffixes) or name in KEPT_METADATA_FILES):
            try:
                archive.extract(member, destination, filter="data")
            except (tarfile.FilterError, OSError):
                continue  # one unsafe or unwritable member is skipped, not the package


def read_copyright(tree: Path, info: PackageInfo) -> None:
    """debian/copyright (or /usr/share/doc/PKG/copyright) in machine-readable format: its header's ``Source`` and
    the ``Files: *`` stanza's ``License`` name the upstream and the licence; debian/upstream/metadata's
    ``Repository`` and ``Repository-Browse`` name the upstream too."""
    for path in sorted(tree.rglob("debian/upstream/metadata")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Repository", "Repository-Browse", "Bug-Database") and value.strip():
                info.upstream_urls.append(value.strip())
    for path in sorted(tree.rglob("copyright")):
        stanzas = path.read_text(encoding="utf-8", errors="replace").split("\n\n")
        header = dict(HeaderParser().parsestr(stanzas[0]).items())
        if header.get("Source"):
            info.upstream_urls.extend(header["Source"].split())
        for stanza in stanzas[1:]:
            fields = dict(HeaderParser().parsestr(stanza.strip()).items())
            if fields.get("Files", "").strip() == "*" and fields.get("License") and not info.license:
                info.license = fields["License"].splitlines()[0].strip()
        if info.license:
            return


class Npm:
    """npm's own client, with its cache under the miner's cache folder."""

    def __init__(self, cache: Path):
        self.cache = cache

    def lookup(self, spec: PackageSpec) -> PackageInfo:
        output = run_tool(["npm", "view", spec.name, "name", "version", "license", "repository", "homepage",
                           "--json", "--cache", str(self.cache)])
        fields = json.loads(output or "{}")
        return PackageInfo(version=str(fields.get("version", "")), license=_npm_license(fields.get("license")),
                           upstream_urls=_npm_urls(fields))

    def fetch(self, spec: PackageSpec, work: Path, suffixes: tuple[str, ...], info: PackageInfo) -> Path:
        download = work / "download"
        download.mkdir(parents=True, exist_ok=True)
        run_tool(["npm", "pack", f"{spec.name}@{info.version}", "--pack-destination", str(download), "--json",
                  "--cache", str(self.cache)])
        tree = work / "tree"
        for tarball in download.glob("*.tgz"):
            unpack(tarball, tree, suffixes)
        manifest = tree / "package" / "package.json"
        if manifest.exists():
            fields = json.loads(manifest.read_text(encoding="utf-8", errors="replace") or "{}")
            info.upstream_urls.extend(_npm_urls(fields))
            info.license = info.license or _npm_license(fields.get("license"))
        return tree


def _npm_urls(fields: dict) -> list[str]:
    repository = fields.get("repository")
    url = repository.get("url", "") if isinstance(repository, dict) else str(repository or "")
    return [text for text in (url, str(fields.get("homepage") or "")) if text]


def _npm_license(value) -> str:
    return value.get("type", "") if isinstance(value, dict) else str(value or "")
