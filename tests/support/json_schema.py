#!/usr/bin/env python3
"""Validates JSON documents against a JSON Schema (the subset kernelwatch's
schemas use: type, enum, const, properties, required, additionalProperties,
items, minItems, maxItems, minLength, pattern, minimum, exclusiveMinimum,
oneOf, anyOf, $ref to #/$defs/...). The machines have no jsonschema package
to install, and this subset is all kernels/stage.schema.json needs; a schema
keyword outside it is an error, never ignored.

usage: json_schema.py SCHEMA FILE [FILE ...]
Prints each problem as FILE: PATH: what is wrong; exits 1 when there is one.
"""
import json
import re
import sys

KNOWN = {"$schema", "$id", "$defs", "$ref", "title", "description", "type", "enum", "const", "properties",
         "required", "additionalProperties", "items", "minItems", "maxItems", "minLength", "pattern",
         "minimum", "exclusiveMinimum", "oneOf", "anyOf"}

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


class Validator:
    def __init__(self, schema):
        self.root = schema

    def resolve(self, ref):
        if not ref.startswith("#/"):
            raise ValueError(f"$ref {ref}: only references into this schema (#/...) are supported")
        node = self.root
        for part in ref[2:].split("/"):
            node = node[part]
        return node

    def errors(self, value, schema, path="$"):
        """Every problem of `value` under `schema`, as 'PATH: message'."""
        unknown = set(schema) - KNOWN
        if unknown:
            raise ValueError(f"schema at {path}: unsupported keyword(s) {sorted(unknown)}")
        if "$ref" in schema:
            return self.errors(value, self.resolve(schema["$ref"]), path)
        for combinator in ("oneOf", "anyOf"):
            if combinator in schema:
                results = [self.errors(value, option, path) for option in schema[combinator]]
                matching = sum(1 for r in results if not r)
                if combinator == "oneOf" and matching > 1:
                    return [f"{path}: matches {matching} of oneOf's schemas, not one"]
                if matching == 0:
                    return self.nearest(value, schema[combinator], results, combinator, path)
        return self.value_errors(value, schema, path)

    def nearest(self, value, options, results, combinator, path):
        """Why `value` matches none of `options`: the problems under the
        option of its own type (and, among those, the one whose required
        fields it has) with the fewest of them."""
        def rank(i):
            option = options[i]
            while "$ref" in option:
                option = self.resolve(option["$ref"])
            names = option.get("type", [])
            names = names if isinstance(names, list) else [names]
            wrong_type = bool(names) and not any(TYPES[name](value) for name in names)
            missing = isinstance(value, dict) and any(key not in value for key in option.get("required", []))
            return (wrong_type, missing, len(results[i]))
        closest = results[min(range(len(options)), key=rank)]
        return [f"{path}: matches none of {combinator}'s {len(options)} schemas; nearest: " + "; ".join(closest[:3])]

    def value_errors(self, value, schema, path):
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(TYPES[name](value) for name in names):
                return [f"{path}: must be {' or '.join(names)}, got {type_name(value)}"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{path}: {json.dumps(value)} is not one of {json.dumps(schema['enum'])}"]
        if "const" in schema and value != schema["const"]:
            return [f"{path}: must be {json.dumps(schema['const'])}"]
        found = []
        if isinstance(value, str):
            if len(value) < schema.get("minLength", 0):
                found.append(f"{path}: shorter than {schema['minLength']} character(s)")
            if "pattern" in schema and not re.search(schema["pattern"], value):
                found.append(f"{path}: {json.dumps(value)} does not match {schema['pattern']}")
        if TYPES["number"](value):
            if "minimum" in schema and value < schema["minimum"]:
                found.append(f"{path}: {value} is below the minimum {schema['minimum']}")
            if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
                found.append(f"{path}: {value} must be above {schema['exclusiveMinimum']}")
        if isinstance(value, list):
            found += self.array_errors(value, schema, path)
        if isinstance(value, dict):
            found += self.object_errors(value, schema, path)
        return found

    def array_errors(self, value, schema, path):
        found = []
        if len(value) < schema.get("minItems", 0):
            found.append(f"{path}: {len(value)} item(s), at least {schema['minItems']} required")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            found.append(f"{path}: {len(value)} item(s), at most {schema['maxItems']} allowed")
        if "items" in schema:
            for i, item in enumerate(value):
                found += self.errors(item, schema["items"], f"{path}[{i}]")
        return found

    def object_errors(self, value, schema, path):
        found = [f"{path}: {name} is required" for name in schema.get("required", []) if name not in value]
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            where = f"{path}.{name}"
            if name in properties:
                found += self.errors(item, properties[name], where)
            elif extra is False:
                found.append(f"{where}: not a field of this object (known: {', '.join(sorted(properties))})")
            elif isinstance(extra, dict):
                found += self.errors(item, extra, where)
        return found


def type_name(value):
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if TYPES[name](value):
            return name
    return type(value).__name__


def validate(schema, document):
    return Validator(schema).errors(document, schema)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 64
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    failed = False
    for path in sys.argv[2:]:
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
        except (OSError, json.JSONDecodeError) as error:
            print(f"{path}: {error}")
            failed = True
            continue
        for problem in validate(schema, document):
            print(f"{path}: {problem}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
