"""The runtime of the generated models: conversion to and from the JSON
form the API server speaks. The models name their attributes' types as the
kubernetes client's models do (``openapi_types``: "int", "str",
"list[X]", "dict(str, X)", a class name), so the client's ApiClient
serialises them as it serialises its own."""

import dataclasses
import datetime
import json
import re
from typing import Any, Dict, Type, TypeVar

from kubernetes import client as k8s

T = TypeVar("T", bound="Model")

_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(([^,]+), (.+)\)$")
_PRIMITIVES = {"int": int, "str": str, "bool": bool, "float": float}

# Every generated class by name, filled as the version modules load.
REGISTRY: Dict[str, type] = {}


class _Response:  # pylint: disable=too-few-public-methods
    """What ApiClient.deserialize reads: a body in ``data``."""

    def __init__(self, data):
        self.data = json.dumps(data)


_api_client = None


def _client():
    global _api_client  # pylint: disable=global-statement
    if _api_client is None:
        _api_client = k8s.ApiClient()
    return _api_client


class Model:
    """Base of every generated model."""

    openapi_types: Dict[str, str] = {}
    attribute_map: Dict[str, str] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        REGISTRY[cls.__name__] = cls

    def to_dict(self) -> Dict[str, Any]:
        """The object as the API server's JSON (camelCase keys, unset
        attributes left out, times in RFC 3339)."""
        return _client().sanitize_for_serialization(self)

    @classmethod
    def from_dict(cls: Type[T], data: Dict[str, Any]) -> T:
        """The model of a JSON object as the API server returns it; keys the
        model does not know are ignored."""
        return decode(data, cls.__name__)


def decode(data: Any, type_name: str) -> Any:
    """Converts JSON data to the type named as in ``openapi_types``."""
    if data is None:
        return None
    match = _LIST.match(type_name)
    if match:
        return [decode(v, match.group(1)) for v in data]
    match = _DICT.match(type_name)
    if match:
        return {k: decode(v, match.group(2)) for k, v in data.items()}
    if type_name in _PRIMITIVES:
        return _PRIMITIVES[type_name](data)
    if type_name == "object":
        return data
    if type_name == "datetime":
        return _parse_time(data)
    cls = REGISTRY.get(type_name)
    if cls is None:
        return _client().deserialize(_Response(data), type_name)
    if not isinstance(data, dict):
        raise ValueError("%s: expected an object, got %r" % (type_name, data))
    kwargs = {}
    for attr, json_key in cls.attribute_map.items():
        if json_key in data:
            kwargs[attr] = decode(data[json_key], cls.openapi_types[attr])
        elif _required(cls, attr):
            kwargs[attr] = None
    return cls(**kwargs)


def _required(cls, attr):
    field = cls.__dataclass_fields__[attr]  # type: ignore[attr-defined]
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _parse_time(value):
    if isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
