"""The config file: option defaults per command, below the command line and the environment and
above the built-in defaults. Both apps read the same file, `$GPUADVISOR_CONFIG` or
`$XDG_CONFIG_HOME/gpu-advisor/config.toml` (XDG_CONFIG_HOME defaults to ~/.config):

    [defaults]              # the shared settings (gpuadvisor.cli.settings), for every command
    store = "~/measurements/runs.db"

    [advisor.recommend]     # a table per command, as it is typed; keys are its long options
    provider = ["gcp"]
    confidence = 0.95

    [profiler.sweep]
    max-cost = 20

The result is click's `default_map`: option defaults keyed by parameter name, nested per command.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from gpuadvisor.cli.output import one_line
from gpuadvisor.cli.settings import SETTINGS, envvar

try:  # typer >= 0.20 vendors click; older typers use click itself
    from typer._click import Command, Context, Parameter
    from typer._click.exceptions import BadParameter
except ImportError:
    from click import BadParameter, Command, Context, Parameter

log = logging.getLogger(__name__)

APPS = ("advisor", "profiler")  # the apps whose tables share the file
CONFIG_VARIABLE = "GPUADVISOR_CONFIG"


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the key."""


def config_path() -> Path | None:
    """The config file in force, or None where there is none."""
    named = os.environ.get(CONFIG_VARIABLE)
    if named:
        path = Path(named).expanduser()
        if not path.exists():
            raise ConfigError(f"{CONFIG_VARIABLE} names {path}, which does not exist; create "
                              f"it or unset {CONFIG_VARIABLE}")
        return path
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    path = Path(base) / "gpu-advisor" / "config.toml"
    return path if path.is_file() else None


def load_defaults(root: Command, commands: Collection[str]) -> dict[str, Any] | None:
    """The config file's defaults for the app `root` as a click default_map (None without a
    file). `commands` names every command of the app, registered or not: a table for one that
    this run did not register is checked by the run that does."""
    path = config_path()
    if path is None:
        return None
    doc = _read(path)
    for section in doc:
        if section not in ("defaults", *APPS):
            raise ConfigError(f"config file {path}: unknown table [{section}]; use [defaults], "
                              f"{', '.join(f'[{app}.<command>]' for app in APPS)}")
    shared = _shared(_table(doc, "defaults", path, "defaults"), path)
    return _command_map(root, _table(doc, root.name, path, root.name), shared, path, root.name,
                        commands)


def log_sources(default_map: Mapping[str, Any] | None) -> None:
    """At -v, where this run's settings come from besides its command line."""
    if not log.isEnabledFor(logging.INFO):
        return
    try:
        path = config_path()
    except ConfigError as error:  # run_app stopped on it already; an app run another way
        path = f"unusable ({error})"
    log.info("config file: %s", path or "none")
    log.debug("defaults from it: %s", default_map or {})
    for setting in SETTINGS:
        if envvar(setting) in os.environ:
            log.info("%s=%s in the environment", envvar(setting), os.environ[envvar(setting)])


def _read(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML ({error}); fix it or point "
                          f"{CONFIG_VARIABLE} at another file") from None
    except OSError as error:
        raise ConfigError(f"cannot read the config file {path} ({error.strerror})") from None


def _table(parent: Mapping[str, Any], key: str, path: Path, name: str) -> dict[str, Any]:
    table = parent.get(key, {})
    if not isinstance(table, dict):
        raise ConfigError(f"config file {path}: {name} must be a table, [{name}], not a value")
    return table


def _shared(table: Mapping[str, Any], path: Path) -> dict[str, tuple[str, Any]]:
    """[defaults]: environment variable -> (key, value) of each shared setting."""
    for key in table:
        if key not in SETTINGS:
            raise ConfigError(f"config file {path}: [defaults] has no key {key!r}"
                              f"{_closest(key, SETTINGS)}; it takes {', '.join(SETTINGS)}")
    return {envvar(key): (key, value) for key, value in table.items()}


def _command_map(command: Command, table: Mapping[str, Any],
                 shared: Mapping[str, tuple[str, Any]], path: Path, where: str,
                 commands: Collection[str] = ()) -> dict[str, Any]:
    """One command's default_map: its options' values, then its subcommands' maps."""
    ctx = Context(command)
    options = {key: param for param in command.params if _configurable(param)
               for key in _keys(param)}
    subcommands = getattr(command, "commands", {})
    out: dict[str, Any] = {}
    for param in dict.fromkeys(options.values()):
        if param.envvar in shared:
            key, value = shared[param.envvar]
            out[param.name] = _checked(ctx, param, value, f"config file {path}: [defaults] {key}")
    for key, value in table.items():
        if key in subcommands or key in commands:
            continue  # a subcommand's table: mapped below, or by the run that registers it
        param = options.get(key.replace("_", "-"))
        if param is None:
            known = sorted({*options, *subcommands})
            raise ConfigError(f"config file {path}: [{where}] has no key {key!r}"
                              f"{_closest(key, known)}; it takes {', '.join(known) or 'none'}")
        out[param.name] = _checked(ctx, param, value, f"config file {path}: [{where}] {key}")
    for name, subcommand in subcommands.items():
        defaults = _command_map(subcommand, _table(table, name, path, f"{where}.{name}"),
                                shared, path, f"{where}.{name}")
        if defaults:
            out[name] = defaults
    return out


def _configurable(param: Parameter) -> bool:
    # --help, --version and the completion options act at once: nothing to default
    return param.param_type_name == "option" and param.expose_value and not param.is_eager


def _keys(param: Parameter) -> list[str]:
    return [opt[2:] for opt in param.opts if opt.startswith("--")]


def _checked(ctx: Context, param: Any, value: Any, where: str) -> Any:
    """`value` as the option's default, once the option accepts it; a path may start with ~."""
    values = value if isinstance(value, list) else [value]
    if not param.multiple and isinstance(value, list):
        raise ConfigError(f"{where} takes one value, not a list {_toml(value)}")
    flag = param.is_flag and not param.count
    for item in values:
        if isinstance(item, (dict, list)) or isinstance(item, bool) != flag:
            wanted = "true or false" if flag else "a number or a string"
            raise ConfigError(f"{where} must be {wanted}, not {_toml(item)}")
    values = [os.path.expanduser(v) if isinstance(v, str) and v.startswith("~") else v
              for v in values]
    value = values if param.multiple else values[0]
    try:
        param.process_value(ctx, value)
    except BadParameter as error:
        raise ConfigError(f"{where} = {_toml(value)}: {one_line(error.message)}") from None
    return value


def _toml(value: Any) -> str:
    return json.dumps(value, default=str)  # true, "text", [1, 2]: close enough to TOML


def _closest(key: str, known: Collection[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key.replace("_", "-"), list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
