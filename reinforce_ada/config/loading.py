"""Loading a config: a YAML file (nested mappings for sections, e.g. ``sampler: {exit_rule: positive}``) and
command-line options generated from the config tree (``--sampler.exit-rule positive``, plus flat aliases such as
``--group-size`` for the sampler's fields whose names no top-level field takes). Every problem is a
:class:`ConfigError` naming the file (and line) and the field."""

from __future__ import annotations

import argparse
import dataclasses
import re
import textwrap
import typing
from dataclasses import fields
from typing import Any

from reinforce_ada.config.checks import _field_types, check_field_types, field_docs, unknown_fields
from reinforce_ada.errors import ConfigError

__all__ = ["FALSE_SPELLINGS", "SECTION_NOTES", "TRUE_SPELLINGS", "ConfigHelpFormatter", "ConfigOption",
           "add_config_arguments", "config_options", "config_settings", "flat_aliases", "load_config",
           "load_settings", "read_config_file", "settings_over"]


TRUE_SPELLINGS = ("true", "yes", "on", "1")
FALSE_SPELLINGS = ("false", "no", "off", "0")
"""What a boolean option accepts on the command line (any case). In a YAML file a boolean field takes a YAML
boolean (``true``/``false``; YAML 1.1 also reads ``yes``/``no``/``on``/``off``); a quoted string such as ``"maybe"``
or ``"true"`` is an error, not a truthy value."""


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in TRUE_SPELLINGS:
        return True
    if lowered in FALSE_SPELLINGS:
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean ({'/'.join(TRUE_SPELLINGS)} or "
                                     f"{'/'.join(FALSE_SPELLINGS)}), got {text!r}")



def _yaml_loader() -> type:
    """PyYAML's safe loader, plus YAML 1.2 floats (``1e-6`` is a number, not the string PyYAML's YAML 1.1 reads)
    and an error for a key given twice (PyYAML would keep the last one silently)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class reports it
                    break
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice (first on line {first + 1})", key_node.start_mark)
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep=deep)

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"), list("-+0123456789."))
    return Loader


def read_config_file(path: str) -> dict[str, Any]:
    """The mapping in a YAML config file; every problem is a :class:`ConfigError` naming the file (and line)."""
    import yaml

    from reinforce_ada.data.loading import read_utf8_text

    text = read_utf8_text(path, error=ConfigError, what="config file")
    try:
        loaded = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 -- a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err)
        context = getattr(err, "context", None)
        raise ConfigError(f"{where}: invalid YAML: {problem}" + (f" ({context})" if context else "")) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of config fields at the top level "
                          f"(got {type(loaded).__name__})")
    return loaded


def _sections(cls: type) -> dict[str, type]:
    """The fields of ``cls`` that are nested sections (dataclasses), by name."""
    hints = _field_types(cls)
    return {f.name: hints[f.name] for f in fields(cls) if dataclasses.is_dataclass(hints[f.name])}


def _leaves(cls: type, prefix: str = "") -> dict[str, tuple[type, str]]:
    """Every settable field of the tree under ``cls``, by dotted name: ``{"sampler.group_size": (SamplerConfig,
    "group_size"), ...}`` (the class holding it and its name there)."""
    out: dict[str, tuple[type, str]] = {}
    nested = _sections(cls)
    for f in fields(cls):
        if f.name in nested:
            out.update(_leaves(nested[f.name], f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = (cls, f.name)
    return out


def _section_paths(cls: type, prefix: str = "") -> dict[str, type]:
    """Every nested section of the tree under ``cls``, by dotted name: ``{"sampler": SamplerConfig,
    "sampler.streaming": StreamingConfig, ...}``."""
    out: dict[str, type] = {}
    for name, section in _sections(cls).items():
        out[prefix + name] = section
        out.update(_section_paths(section, f"{prefix}{name}."))
    return out


def flat_aliases(cls: type) -> dict[str, str]:
    """Flat spellings of a section's own fields, generated from the tree: ``{"group_size": "sampler.group_size",
    ...}`` -- every direct (non-section) field of a top-level section whose name is not also a top-level field
    (``seed`` is the trainer's, so the sampler's is only ``sampler.seed``)."""
    top = {f.name for f in fields(cls)}
    aliases: dict[str, str] = {}
    for name, section in _sections(cls).items():
        inner = _sections(section)
        for f in fields(section):
            if f.name not in inner and f.name not in top:
                aliases[f.name] = f"{name}.{f.name}"
    return aliases


COMMON_SPELLINGS = {"learning_rate": ("lr",)}
"""Short names other trainers use for a setting, accepted wherever the setting's own name is (``--lr 1e-3``, YAML
``lr: 1e-3``); like a flat alias, one given beside the setting's own name is refused."""


def common_aliases(cls: type) -> dict[str, str]:
    """:data:`COMMON_SPELLINGS` of the settings ``cls``'s tree has, as ``{alias: dotted name}``.

    >>> from reinforce_ada.config import TrainConfig
    >>> common_aliases(TrainConfig)
    {'lr': 'learning_rate'}
    """
    leaves = _leaves(cls)
    return {alias: dotted for dotted, names in COMMON_SPELLINGS.items() if dotted in leaves for alias in names}


def _nest(cls: type, flat: dict[str, Any], source: str | None) -> dict[str, Any]:
    """Dotted names (``sampler.streaming.target``), flat aliases (``group_size``) and common spellings (``lr``) put in
    their sections; a setting given under two spellings or an unknown name (with the closest known one) is a
    ConfigError naming them."""
    where = f"{source}: " if source else ""
    aliases, leaves = {**flat_aliases(cls), **common_aliases(cls)}, _leaves(cls)
    known = sorted(set(leaves) | set(aliases))
    spelled: dict[str, str] = {}
    unknown = []
    paths = _section_paths(cls)
    for key in flat:
        if key in paths and not isinstance(flat[key], dict):
            raise ConfigError(f"{where}config field `{key}`: expected a mapping of {paths[key].__name__} fields, got "
                              f"{type(flat[key]).__name__} {flat[key]!r}")
        dotted = aliases.get(key, key)
        if dotted not in leaves:
            unknown.append(key)
            continue
        if dotted in spelled:
            raise ConfigError(f"{where}`{spelled[dotted]}` and `{key}` are the same setting ({dotted}); give one")
        spelled[dotted] = key
    if unknown:
        raise ConfigError(f"{where}unknown config field(s) {unknown_fields(unknown, known)} for {cls.__name__}")
    nested: dict[str, Any] = {}
    for dotted, key in spelled.items():
        *path, name = dotted.split(".")
        target = nested
        for part in path:
            target = target.setdefault(part, {})
        target[name] = flat[key]
    return nested


def _flatten(cls: type, values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A (possibly nested) mapping of fields as dotted names; a section's value must be a mapping."""
    out: dict[str, Any] = {}
    nested = _sections(cls)
    for key, value in values.items():
        if key in nested and isinstance(value, dict):
            out.update(_flatten(nested[key], value, f"{prefix}{key}."))
        else:
            out[prefix + str(key)] = value
    return out


def _check_types(cls: type, nested: dict[str, Any], source: str | None, prefix: str = "") -> None:
    check_field_types(cls, nested, source=source, prefix=prefix)
    for name, section in _sections(cls).items():
        if isinstance(nested.get(name), dict):
            _check_types(section, nested[name], source, f"{prefix}{name}.")


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def config_settings(cls: type, values: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """``values`` (nested sections, dotted names or flat aliases) as ``{dotted name: value}``, each checked as
    :func:`load_config` checks it (known field, one spelling, the field's type), without building ``cls``: what a
    caller that combines several sources of settings compares and merges (``reinforce-ada compare``)."""
    nested = _nest(cls, _flatten(cls, dict(values)), source)
    _check_types(cls, nested, source)
    return _flatten(cls, nested)


def load_config(cls: type, path: str | None = None, overrides: dict[str, Any] | None = None) -> Any:
    """Build ``cls`` from an optional YAML file, then command-line overrides (dotted names or flat aliases).

    Checked before the config is built, each with a message naming the file and field: the file exists, is UTF-8
    and valid YAML (line and column given), holds a mapping without repeated keys, names only known fields (with
    the closest known name suggested; one setting under two spellings is refused)
    and gives each a value of the field's type. ``cls.__post_init__`` then checks ranges and combinations.
    """
    return cls(**load_settings(cls, path, overrides))


def load_settings(cls: type, path: str | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """What :func:`load_config` builds ``cls`` from: the YAML file's settings, then the overrides on top, nested by
    section and checked as it checks them; every field not given is left out (its default applies)."""
    values: dict[str, Any] = {}
    if path:
        loaded = _nest(cls, _flatten(cls, read_config_file(path)), path)
        _check_types(cls, loaded, path)
        values = loaded
    given = _nest(cls, _flatten(cls, dict(overrides or {})), None)
    _check_types(cls, given, None)
    return _merge(values, given)


def settings_over(cls: type, base: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (nested, :func:`load_settings`'s) over ``base`` (dotted names: e.g. the settings a run was trained
    with) as one nested mapping to build ``cls`` from; a name of ``base`` that ``cls`` does not have is left out."""
    leaves = _leaves(cls)
    return _merge(_nest(cls, {k: v for k, v in base.items() if k in leaves}, None), given)


@dataclasses.dataclass(frozen=True)
class ConfigOption:
    """One setting of a config tree as the command line offers it (:func:`config_options`)."""

    dotted: str
    """Its dotted name (``sampler.group_size``): the YAML path, and the dest of its ``--sampler.group-size``."""
    section: str
    """Its help group: the class body's section it is declared under, or the nested section's dotted name."""
    options: tuple[str, ...]
    """Its spellings, the one the help shows first (a flat alias, ``--group-size``, before ``--sampler.group-size``)."""
    kind: type
    """``bool``, ``int``, ``float`` or ``str``: how the command line reads its value."""
    default: str
    """The default as the help writes it (``""`` for a ``None`` that means "not given" and a boolean's ``False``)."""
    doc: str
    """Its whole docstring, as a terminal shows it."""

    @property
    def dests(self) -> tuple[str, ...]:
        """Each spelling's own dest (the dotted name, or the flat alias), so that giving two is caught."""
        return tuple(option.removeprefix("--").replace("-", "_") for option in self.options)


def config_options(cls: type) -> list[ConfigOption]:
    """Every setting of the config tree under ``cls``, in declaration order, as the command line offers it: one
    ``--field-name`` per field (``--section.field-name`` inside a section), plus the flat alias of
    :func:`flat_aliases` where there is one; grouped by the section of ``cls``'s class body each is declared under
    (:func:`~reinforce_ada.config.checks.field_sections`), a nested section's fields by its dotted name. The
    command line's options (:func:`add_config_arguments`) and docs/settings.md (``scripts/settings_doc.py``) are
    both made from this."""
    from reinforce_ada.config.checks import field_sections
    from reinforce_ada.config.defaults import MODEL_DEFAULTS

    aliases = {dotted: alias for alias, dotted in flat_aliases(cls).items()}
    sections = field_sections(cls)
    out = []
    for dotted, (owner, name) in _leaves(cls).items():
        f = owner.__dataclass_fields__[name]
        members = typing.get_args(_field_types(owner)[name]) or (_field_types(owner)[name],)
        kind = next((t for t in (bool, int, float) if t in members), str)
        if f.default is None and name in MODEL_DEFAULTS["tiny"] and owner is cls:
            default = "by model"
        elif f.default is None or (kind is bool and f.default is False):
            default = ""  # None: not given; False: the option alone turns it on
        else:
            default = repr(f.default)
        options = ("--" + dotted.replace("_", "-"),)
        if dotted in aliases:
            options = ("--" + aliases[dotted].replace("_", "-"), *options)
        out.append(ConfigOption(dotted, dotted.rpartition(".")[0] or sections.get(name, "options"), options, kind,
                                default, field_docs(owner).get(name, "")))
    return out


def add_config_arguments(parser: Any, cls: type, choices: dict[str, str] | None = None) -> None:
    """The options of :func:`config_options`, typed, defaulting to "not given", in one help group each section. Each
    spelling is an option of its own with its own dest (giving both is caught by :func:`load_config`); the help shows
    the first, and the ``sampler`` group says once that every option in it is also ``--sampler.NAME``. An option's
    help is the first sentence of its docstring (the whole docstring: docs/settings.md), then
    ``choices[dotted name]`` when given (what a registry holds, listed by the caller that knows it), then the
    default."""
    from reinforce_ada.config.checks import first_sentence

    groups: dict[str, Any] = {}
    for setting in config_options(cls):
        listed = f" One of: {choices[setting.dotted]}." if choices and setting.dotted in choices else ""
        shown_default = f" (default: {setting.default})" if setting.default else ""
        help_text = f"{first_sentence(setting.doc)}{listed}{shown_default}".replace("%", "%%")
        group = groups.get(setting.section)
        if group is None and isinstance(parser, argparse._ArgumentGroup):  # a group of another command's: in it
            group = parser
        elif group is None:
            note = SECTION_NOTES.get(setting.section)
            group = groups[setting.section] = parser.add_argument_group(setting.section,
                                                                         note and textwrap.fill(note, 78))
        for i, (option, dest) in enumerate(zip(setting.options, setting.dests)):
            kwargs: dict[str, Any] = dict(dest=dest, default=argparse.SUPPRESS,
                                          help=help_text if i == 0 else argparse.SUPPRESS)
            if setting.kind is bool:
                action = group.add_argument(option, type=_parse_bool, nargs="?", const=True, metavar="BOOL", **kwargs)
            else:
                action = group.add_argument(option, type=setting.kind, metavar=_METAVARS[setting.kind], **kwargs)
            if i:
                action.alias_of = setting.options[0]  # not in the help, but a spelling the command line suggests
        for option, dest in _typed_spellings(setting):  # what users of other trainers type: unlisted
            kwargs = dict(dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
            if setting.kind is bool:  # (never suggested for a typo: the suggestion is the option's own spelling)
                group.add_argument(option, type=_parse_bool, nargs="?", const=True, metavar="BOOL", **kwargs)
            else:
                group.add_argument(option, type=setting.kind, metavar=_METAVARS[setting.kind], **kwargs)


def _typed_spellings(setting: ConfigOption) -> list[tuple[str, str]]:
    """The command-line spellings of ``setting`` besides its own, each with its dest; hidden from the help: each
    option with underscores (``--learning_rate``, HF's and TRL's spelling: the same name, so the option's own dest)
    and :data:`COMMON_SPELLINGS` (``--lr``: a name of its own, so that giving it beside ``--learning-rate`` is
    refused as two spellings of one setting, not settled by their order)."""
    extra = {option.replace("-", "_").replace("__", "--", 1): setting.dests[0] for option in setting.options}
    extra.update({f"--{alias.replace('_', '-')}": alias for alias in COMMON_SPELLINGS.get(setting.dotted, ())})
    return [(option, dest) for option, dest in extra.items() if option not in setting.options]


_METAVARS = {int: "N", float: "X", str: "TEXT"}
"""An option's value in the help, by type (a boolean's is ``[BOOL]``: ``--lora`` alone means true)."""

SECTION_NOTES = {"sampler": "Each option here is also accepted as --sampler.NAME (the config tree's spelling; in "
                             "YAML: sampler: {NAME: value}).",
                  "sampler.streaming": "sampler.mode streaming (YAML: sampler: {streaming: {NAME: value}}).",
                  "sampler.memory": "The cross-step pass-rate memory (YAML: sampler: {memory: {NAME: value}}).",
                  "sampler.est": "sampler.mode est, strategy ada-est (YAML: sampler: {est: {NAME: value}})."}
"""A line under a nested section's heading in the help."""


class ConfigHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The help of a command whose options come from a config tree (:func:`add_config_arguments`): each option's help
    wrapped at spaces only (``ada-balanced`` and ``reasoning-gym:<dataset>`` stay whole), the description as
    written."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False)
