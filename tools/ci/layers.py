"""Import-layer check: the packages' one-way dependencies, agents apart, no import cycles.

Run as `python tools/ci/layers.py` (part of `hatch run test`); exits 1 listing every violation.
Rules, read from each module's imports with `ast` (nothing is imported or executed):

1. A package imports only the in-repo packages below it (DESIGN.md section 1); its tests too,
   since each package's own hatch environment holds only its dependency closure.
2. brax-physics never imports a training library (flax, optax, orbax).
3. An agent package of brax-train (`brax_train.ppo`, `.sac`, ...) never imports another agent
   (tests aside: a teacher may be trained by another agent); what two agents share lives beside
   them in brax-train. A declared variant (`VARIANTS`) builds on the agent it varies.
4. No cycle among module-level imports inside a package, those under `if TYPE_CHECKING:` included
   (a type's module is still a dependency); imports inside functions run later and do not count.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LAYERS: dict[str, frozenset[str]] = {
    "brax_math": frozenset(),
    "brax_physics": frozenset({"brax_math"}),
    "brax_envs": frozenset({"brax_math", "brax_physics"}),
    "brax_io": frozenset({"brax_math", "brax_physics"}),
    "brax_train": frozenset({"brax_math", "brax_physics", "brax_envs", "brax_io"}),
}
"""Each import package and the in-repo packages it may import."""

FORBIDDEN: dict[str, frozenset[str]] = {"brax_physics": frozenset({"flax", "optax", "orbax"})}
"""Third-party top-level modules a package must never import."""

AGENTS = ("apg", "ars", "bc", "es", "ppo", "rppo", "sac")
"""brax-train's agent subpackages, which never import each other."""

VARIANTS: dict[str, str] = {"rppo": "ppo"}
"""Agents that are another agent with one part changed (recurrent PPO: PPO's losses, a recurrent core)."""


@dataclasses.dataclass(frozen=True)
class Import:
    """One import statement: the importing module, the imported module, where, and when it runs."""

    module: str
    target: str
    path: Path
    line: int
    module_level: bool


def module_name(path: Path, src: Path) -> str:
    """The dotted name of the module at `path` under a package's `src` folder."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _walk(body: Iterable[ast.stmt], module_level: bool) -> Iterator[tuple[ast.stmt, bool]]:
    """Every statement under `body`, with whether it runs when the module is imported."""
    for node in body:
        yield node, module_level
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(node.body, False)
        elif isinstance(node, ast.ClassDef):
            yield from _walk(node.body, module_level)
        elif isinstance(node, ast.If):
            yield from _walk(node.body, module_level)
            yield from _walk(node.orelse, module_level)
        elif isinstance(node, ast.Try | ast.TryStar):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _walk(block, module_level)
        elif isinstance(node, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor | ast.While):
            yield from _walk(node.body, module_level)
            yield from _walk(getattr(node, "orelse", []), module_level)


def imports(path: Path, module: str, is_package: bool) -> list[Import]:
    """The imports of the module `module` at `path` (relative ones resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node, module_level in _walk(tree.body, True):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # `from pkg import sub` may import the submodule `pkg.sub`; resolved against known modules later.
            targets = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [Import(module, t, path, node.lineno, module_level) for t in targets]
    return found


def package_sources() -> dict[str, Path]:
    """Each in-repo import package and its `src` folder."""
    out = {}
    for src in sorted((ROOT / "packages").glob("*/src")):
        for pkg in src.iterdir():
            if pkg.is_dir() and (pkg / "__init__.py").exists():
                out[pkg.name] = src
    return out


def _resolve(target: str, modules: set[str]) -> str | None:
    """The longest known module that `target` names or lies in (None for third-party names)."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in modules:
            return name
    return None


def _agent(module: str) -> str | None:
    """The brax-train agent a module belongs to, if any."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "brax_train" and parts[1] in AGENTS else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def violations(sources: dict[str, Path] | None = None) -> list[str]:
    """Every broken rule, one line each (`path:line: message`)."""
    sources = package_sources() if sources is None else sources
    files: dict[str, tuple[Path, bool]] = {}
    for pkg, src in sources.items():
        for path in sorted((src / pkg).rglob("*.py")):
            files[module_name(path, src)] = (path, path.name == "__init__.py")
    modules = set(files)
    # `from a.b import c` is checked as both `a.b` and `a.b.c`: one message per statement and rule.
    found: dict[tuple[Path, int, str], str] = {}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, (path, is_package) in sorted(files.items()):
        pkg = module.split(".")[0]
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        for imp in imports(path, module, is_package):
            top = imp.target.split(".")[0]
            if top in sources and top != pkg and top not in LAYERS.get(pkg, frozenset()):
                found.setdefault((where, imp.line, "layer"),
                                 f"{where}:{imp.line}: {pkg} imports {imp.target} ({top} is not below {pkg})")
            if top in FORBIDDEN.get(pkg, frozenset()):
                message = f"{pkg} imports {imp.target} (never a dependency of {pkg})"
                found.setdefault((where, imp.line, "forbidden"), f"{where}:{imp.line}: {message}")
            target = _resolve(imp.target, modules)
            if target is None:
                continue
            mine, theirs = _agent(module), _agent(target)
            test = path.name.endswith("_test.py")
            if mine and theirs and mine != theirs and not test and VARIANTS.get(mine) != theirs:
                found.setdefault((where, imp.line, "agent"),
                                 f"{where}:{imp.line}: agent {mine} imports agent {theirs} ({imp.target})")
            # A package's own __init__ importing its parent is the normal submodule import; cycles
            # through parent packages count only between modules that are not each other's ancestors.
            ancestors = module.startswith(target + ".") or target.startswith(module + ".")
            if imp.module_level and target != module and target.split(".")[0] == pkg and not ancestors:
                graph[module].add(target)
    cycles = [f"import cycle among {', '.join(component)}" for component in _cycles(graph)]
    return sorted(found.values()) + cycles


def main(argv: list[str] | None = None) -> int:
    """Print each violation; exit 1 if there is any."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    found = violations()
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} import-layer violation(s); the rules are in tools/ci/layers.py's docstring")
        return 1
    print(f"import layers: {len(package_sources())} packages, no violation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
