"""GitHub's GraphQL endpoint for the loopback GitHub: a real parser, a small schema.

Why a parser and not regexes: the daemon's queries are ordinary GraphQL
(variables, aliases, fragments), and a fake that answers whatever string
contains `resolveReviewThread` would accept queries GitHub refuses. So the
document is parsed by the spec's grammar, validated against the slice of
GitHub's schema below, then executed. As GitHub does:

- a document that does not parse, names an unknown field or argument, leaves
  a connection without `first`/`last`, or lacks a non-null variable answers
  `{"errors": [...]}` with no `data`, and nothing is changed;
- an id that resolves to nothing answers `{"data": {"field": null}, "errors":
  [{"type": "NOT_FOUND", "path": [...], ...}]}` (still HTTP 200);
- only the selected fields come back, under their aliases.

The schema holds what issue #29 needs: `repository.pullRequest.reviewThreads`
(with comments' `databaseId`, the REST id), `node(id:)`, `viewer`, and the
mutations `resolveReviewThread`, `unresolveReviewThread`,
`markPullRequestReadyForReview` and `convertPullRequestToDraft`.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.github_api import FakeGitHub, FakeRepo

__all__ = ["GraphQLSyntaxError", "execute", "parse"]


# -- the document ----------------------------------------------------------------------


class GraphQLSyntaxError(Exception):
    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class EnumValue:
    value: str


@dataclass
class Field:
    name: str
    alias: str | None
    args: dict[str, Any]
    selections: list[Selection]
    line: int
    column: int

    @property
    def key(self) -> str:
        return self.alias or self.name


@dataclass
class InlineFragment:
    type_condition: str | None
    selections: list[Selection]


@dataclass
class FragmentSpread:
    name: str
    line: int
    column: int


Selection = Field | InlineFragment | FragmentSpread


@dataclass
class VarDef:
    name: str
    type: str
    default: Any = None
    has_default: bool = False


@dataclass
class Operation:
    kind: str  # "query" or "mutation"
    name: str | None
    variables: dict[str, VarDef]
    selections: list[Selection]
    line: int
    column: int


@dataclass
class Document:
    operations: list[Operation] = field(default_factory=list)
    fragments: dict[str, InlineFragment] = field(default_factory=dict)


_TOKEN = re.compile(
    r"""
    (?P<skip>[\s,\ufeff]+|\#[^\n]*)
  | (?P<spread>\.\.\.)
  | (?P<punct>[!$&()\:=@\[\]{}|])
  | (?P<name>[_A-Za-z][_0-9A-Za-z]*)
  | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<block>\"\"\"(?:\\\"\"\"|[^"]|"(?!""))*\"\"\")
  | (?P<string>"(?:\\.|[^"\\\n])*")
    """,
    re.VERBOSE,
)
# The names GitHub's parser gives tokens in "Parse error on ..." messages.
_KINDS = {
    "{": "LCURLY",
    "}": "RCURLY",
    "(": "LPAREN",
    ")": "RPAREN",
    "[": "LBRACKET",
    "]": "RBRACKET",
    ":": "COLON",
    "$": "VAR_SIGN",
    "!": "BANG",
    "=": "EQUALS",
    "@": "DIR_SIGN",
}


@dataclass(frozen=True)
class _Token:
    kind: str  # punct text, "name", "number", "string", "spread", "eof"
    text: str
    line: int
    column: int


def _tokens(source: str) -> list[_Token]:
    found: list[_Token] = []
    position, line, line_start = 0, 1, 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        column = position - line_start + 1
        if match is None:
            raise GraphQLSyntaxError(
                f'Parse error on "{source[position]}" at [{line}, {column}]', line, column
            )
        text, kind = match.group(), match.lastgroup or ""
        if kind == "punct":
            found.append(_Token(text, text, line, column))
        elif kind == "block":
            found.append(_Token("string", _block_string(text), line, column))
        elif kind == "string":
            found.append(_Token("string", json.loads(text), line, column))
        elif kind != "skip":
            found.append(_Token(kind, text, line, column))
        newlines = text.count("\n")
        if newlines:
            line += newlines
            line_start = position + text.rindex("\n") + 1
        position = match.end()
    found.append(_Token("eof", "", line, position - line_start + 1))
    return found


def _block_string(text: str) -> str:
    lines = text[3:-3].replace('\\"""', '"""').splitlines()
    indents = [len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()]
    cut = min(indents, default=0)
    body = [lines[0], *(x[cut:] for x in lines[1:])] if lines else []
    return "\n".join(body).strip("\n")


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = _tokens(source)
        self.at = 0

    @property
    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self, kind: str | None = None) -> _Token:
        token = self.peek
        if kind is not None and token.kind != kind:
            self.fail(token)
        self.at += 1
        return token

    def fail(self, token: _Token) -> None:
        if token.kind == "eof":
            raise GraphQLSyntaxError("Unexpected end of document", token.line, token.column)
        label = _KINDS.get(token.kind, "IDENTIFIER" if token.kind == "name" else token.kind.upper())
        raise GraphQLSyntaxError(
            f'Parse error on "{token.text}" ({label}) at [{token.line}, {token.column}]',
            token.line,
            token.column,
        )

    def document(self) -> Document:
        doc = Document()
        if self.peek.kind == "eof":
            self.fail(self.peek)
        while self.peek.kind != "eof":
            token = self.peek
            if token.kind == "{":
                doc.operations.append(
                    Operation("query", None, {}, self.selection_set(), token.line, token.column)
                )
            elif token.kind == "name" and token.text in ("query", "mutation"):
                doc.operations.append(self.operation())
            elif token.kind == "name" and token.text == "fragment":
                self.take()
                name = self.take("name").text
                if self.take("name").text != "on":
                    self.fail(self.tokens[self.at - 1])
                condition = self.take("name").text
                self.directives()
                doc.fragments[name] = InlineFragment(condition, self.selection_set())
            else:
                self.fail(token)
        return doc

    def operation(self) -> Operation:
        start = self.take("name")
        name = self.take().text if self.peek.kind == "name" else None
        variables: dict[str, VarDef] = {}
        if self.peek.kind == "(":
            self.take()
            while self.peek.kind != ")":
                self.take("$")
                var = VarDef(self.take("name").text, "")
                self.take(":")
                var.type = self.type_ref()
                if self.peek.kind == "=":
                    self.take()
                    var.default, var.has_default = self.value(const=True), True
                variables[var.name] = var
            self.take(")")
        self.directives()
        return Operation(
            start.text, name, variables, self.selection_set(), start.line, start.column
        )

    def type_ref(self) -> str:
        if self.peek.kind == "[":
            self.take()
            inner = self.type_ref()
            self.take("]")
            text = f"[{inner}]"
        else:
            text = self.take("name").text
        if self.peek.kind == "!":
            self.take()
            text += "!"
        return text

    def directives(self) -> None:
        while self.peek.kind == "@":  # parsed and ignored (@include/@skip are not used here)
            self.take()
            self.take("name")
            if self.peek.kind == "(":
                self.arguments()

    def selection_set(self) -> list[Selection]:
        self.take("{")
        selections: list[Selection] = []
        while self.peek.kind != "}":
            selections.append(self.selection())
        self.take("}")
        if not selections:
            self.fail(self.tokens[self.at - 1])
        return selections

    def selection(self) -> Selection:
        if self.peek.kind == "spread":
            spread = self.take()
            if self.peek.kind == "name" and self.peek.text != "on":
                return FragmentSpread(self.take().text, spread.line, spread.column)
            condition = None
            if self.peek.kind == "name":
                self.take()
                condition = self.take("name").text
            self.directives()
            return InlineFragment(condition, self.selection_set())
        first = self.take("name")
        alias, name = None, first.text
        if self.peek.kind == ":":
            self.take()
            alias, name = first.text, self.take("name").text
        args = self.arguments() if self.peek.kind == "(" else {}
        self.directives()
        selections = self.selection_set() if self.peek.kind == "{" else []
        return Field(name, alias, args, selections, first.line, first.column)

    def arguments(self) -> dict[str, Any]:
        self.take("(")
        args: dict[str, Any] = {}
        while self.peek.kind != ")":
            name = self.take("name").text
            self.take(":")
            args[name] = self.value(const=False)
        self.take(")")
        return args

    def value(self, *, const: bool) -> Any:
        token = self.take()
        if token.kind == "$" and not const:
            return Var(self.take("name").text)
        if token.kind == "number":
            return float(token.text) if any(c in token.text for c in ".eE") else int(token.text)
        if token.kind == "string":
            return token.text
        if token.kind == "name":
            return {"true": True, "false": False, "null": None}.get(
                token.text, EnumValue(token.text)
            )
        if token.kind == "[":
            items = []
            while self.peek.kind != "]":
                items.append(self.value(const=const))
            self.take("]")
            return items
        if token.kind == "{":
            fields: dict[str, Any] = {}
            while self.peek.kind != "}":
                key = self.take("name").text
                self.take(":")
                fields[key] = self.value(const=const)
            self.take("}")
            return fields
        self.fail(token)
        raise AssertionError("unreachable")


def parse(source: str) -> Document:
    """The document `source` holds; raises `GraphQLSyntaxError` as GitHub's parser would."""
    return _Parser(source).document()


# -- the schema ------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldDef:
    type: str  # GraphQL type reference: "ID!", "[PullRequestReviewThread]", ...
    args: dict[str, str] = field(default_factory=dict)


_SCALARS = {
    "ID",
    "String",
    "Int",
    "Boolean",
    "DateTime",
    "URI",
    "GitObjectID",
    "PullRequestState",
    "PullRequestReviewDecision",
    "DiffSide",
}
_PAGING = {"first": "Int", "last": "Int", "after": "String", "before": "String"}
_INTERFACES = {"Node", "Actor"}

SCHEMA: dict[str, dict[str, FieldDef]] = {
    "Query": {
        "repository": FieldDef("Repository", {"owner": "String!", "name": "String!"}),
        "node": FieldDef("Node", {"id": "ID!"}),
        "viewer": FieldDef("User!"),
    },
    "Mutation": {
        "resolveReviewThread": FieldDef(
            "ResolveReviewThreadPayload", {"input": "ResolveReviewThreadInput!"}
        ),
        "unresolveReviewThread": FieldDef(
            "UnresolveReviewThreadPayload", {"input": "UnresolveReviewThreadInput!"}
        ),
        "markPullRequestReadyForReview": FieldDef(
            "MarkPullRequestReadyForReviewPayload", {"input": "MarkPullRequestReadyForReviewInput!"}
        ),
        "convertPullRequestToDraft": FieldDef(
            "ConvertPullRequestToDraftPayload", {"input": "ConvertPullRequestToDraftInput!"}
        ),
    },
    "Node": {"id": FieldDef("ID!")},
    "Actor": {"login": FieldDef("String!"), "url": FieldDef("URI!")},
    "User": {"id": FieldDef("ID!"), "login": FieldDef("String!"), "url": FieldDef("URI!")},
    "Repository": {
        "id": FieldDef("ID!"),
        "name": FieldDef("String!"),
        "nameWithOwner": FieldDef("String!"),
        "url": FieldDef("URI!"),
        "pullRequest": FieldDef("PullRequest", {"number": "Int!"}),
    },
    "PullRequest": {
        "id": FieldDef("ID!"),
        "databaseId": FieldDef("Int"),
        "number": FieldDef("Int!"),
        "title": FieldDef("String!"),
        "url": FieldDef("URI!"),
        "isDraft": FieldDef("Boolean!"),
        "state": FieldDef("PullRequestState!"),
        "merged": FieldDef("Boolean!"),
        "closed": FieldDef("Boolean!"),
        "headRefName": FieldDef("String!"),
        "headRefOid": FieldDef("GitObjectID!"),
        "baseRefName": FieldDef("String!"),
        "reviewDecision": FieldDef("PullRequestReviewDecision"),
        "author": FieldDef("Actor"),
        "reviewThreads": FieldDef("PullRequestReviewThreadConnection!", dict(_PAGING)),
    },
    "PullRequestReviewThreadConnection": {
        "nodes": FieldDef("[PullRequestReviewThread]"),
        "edges": FieldDef("[PullRequestReviewThreadEdge]"),
        "pageInfo": FieldDef("PageInfo!"),
        "totalCount": FieldDef("Int!"),
    },
    "PullRequestReviewThreadEdge": {
        "node": FieldDef("PullRequestReviewThread"),
        "cursor": FieldDef("String!"),
    },
    "PullRequestReviewThread": {
        "id": FieldDef("ID!"),
        "isResolved": FieldDef("Boolean!"),
        "isOutdated": FieldDef("Boolean!"),
        "isCollapsed": FieldDef("Boolean!"),
        "path": FieldDef("String!"),
        "line": FieldDef("Int"),
        "originalLine": FieldDef("Int"),
        "startLine": FieldDef("Int"),
        "diffSide": FieldDef("DiffSide!"),
        "viewerCanResolve": FieldDef("Boolean!"),
        "viewerCanReply": FieldDef("Boolean!"),
        "resolvedBy": FieldDef("User"),
        "pullRequest": FieldDef("PullRequest!"),
        "comments": FieldDef("PullRequestReviewCommentConnection!", dict(_PAGING)),
    },
    "PullRequestReviewCommentConnection": {
        "nodes": FieldDef("[PullRequestReviewComment]"),
        "edges": FieldDef("[PullRequestReviewCommentEdge]"),
        "pageInfo": FieldDef("PageInfo!"),
        "totalCount": FieldDef("Int!"),
    },
    "PullRequestReviewCommentEdge": {
        "node": FieldDef("PullRequestReviewComment"),
        "cursor": FieldDef("String!"),
    },
    "PullRequestReviewComment": {
        "id": FieldDef("ID!"),
        "databaseId": FieldDef("Int"),
        "body": FieldDef("String!"),
        "path": FieldDef("String!"),
        "line": FieldDef("Int"),
        "originalLine": FieldDef("Int"),
        "url": FieldDef("URI!"),
        "createdAt": FieldDef("DateTime!"),
        "author": FieldDef("Actor"),
        "replyTo": FieldDef("PullRequestReviewComment"),
        "pullRequestReview": FieldDef("PullRequestReview"),
        "commit": FieldDef("Commit"),
    },
    "PullRequestReview": {
        "id": FieldDef("ID!"),
        "databaseId": FieldDef("Int"),
        "state": FieldDef("String!"),
        "body": FieldDef("String!"),
        "author": FieldDef("Actor"),
    },
    "Commit": {"oid": FieldDef("GitObjectID!")},
    "PageInfo": {
        "hasNextPage": FieldDef("Boolean!"),
        "hasPreviousPage": FieldDef("Boolean!"),
        "startCursor": FieldDef("String"),
        "endCursor": FieldDef("String"),
    },
    "ResolveReviewThreadPayload": {
        "clientMutationId": FieldDef("String"),
        "thread": FieldDef("PullRequestReviewThread"),
    },
    "UnresolveReviewThreadPayload": {
        "clientMutationId": FieldDef("String"),
        "thread": FieldDef("PullRequestReviewThread"),
    },
    "MarkPullRequestReadyForReviewPayload": {
        "clientMutationId": FieldDef("String"),
        "pullRequest": FieldDef("PullRequest"),
    },
    "ConvertPullRequestToDraftPayload": {
        "clientMutationId": FieldDef("String"),
        "pullRequest": FieldDef("PullRequest"),
    },
}
_IMPLEMENTS = {
    "User": {"Node", "Actor"},
    "Repository": {"Node"},
    "PullRequest": {"Node"},
    "PullRequestReviewThread": {"Node"},
    "PullRequestReviewComment": {"Node"},
    "PullRequestReview": {"Node"},
}
_INPUTS: dict[str, dict[str, str]] = {
    "ResolveReviewThreadInput": {"threadId": "ID!", "clientMutationId": "String"},
    "UnresolveReviewThreadInput": {"threadId": "ID!", "clientMutationId": "String"},
    "MarkPullRequestReadyForReviewInput": {"pullRequestId": "ID!", "clientMutationId": "String"},
    "ConvertPullRequestToDraftInput": {"pullRequestId": "ID!", "clientMutationId": "String"},
}
_MAX_PAGE = 100


def _named(type_ref: str) -> str:
    return type_ref.strip("[]!")


def _is_list(type_ref: str) -> bool:
    return type_ref.rstrip("!").startswith("[")


# -- validation and execution ----------------------------------------------------------


class _Invalid(Exception):
    """A request error: the whole answer is `{"errors": [...]}`, nothing runs."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.error = error


class FieldError(Exception):
    """A field that cannot be resolved: it becomes null, with a typed error beside it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Obj:
    """A resolved object and its concrete type (needed where the field's type is an interface)."""

    type: str
    data: Any


def _location(node: Field | Operation) -> list[dict[str, int]]:
    return [{"line": node.line, "column": node.column}]


class _Validator:
    def __init__(self, doc: Document, operation: Operation) -> None:
        self.doc = doc
        self.operation = operation
        self.used: set[str] = set()

    def selections(self, type_name: str, selections: list[Selection], path: list[str]) -> None:
        for selection in selections:
            if isinstance(selection, FragmentSpread):
                fragment = self.doc.fragments.get(selection.name)
                if fragment is None:
                    raise _Invalid(
                        {
                            "message": f"Fragment {selection.name} was used, but not defined",
                            "locations": [{"line": selection.line, "column": selection.column}],
                        }
                    )
                self.fragment(type_name, fragment, path)
            elif isinstance(selection, InlineFragment):
                self.fragment(type_name, selection, path)
            else:
                self.field(type_name, selection, path)

    def fragment(self, type_name: str, fragment: InlineFragment, path: list[str]) -> None:
        condition = fragment.type_condition or type_name
        if condition not in SCHEMA:
            raise _Invalid({"message": f"No such type {condition}, so it can't be a fragment"})
        self.selections(condition, fragment.selections, path)

    def field(self, type_name: str, node: Field, path: list[str]) -> None:
        here = [*path, node.key]
        if node.name == "__typename":
            return
        definition = SCHEMA[type_name].get(node.name)
        if definition is None:
            raise _Invalid(
                {
                    "path": here,
                    "extensions": {
                        "code": "undefinedField",
                        "typeName": type_name,
                        "fieldName": node.name,
                    },
                    "locations": _location(node),
                    "message": f"Field '{node.name}' doesn't exist on type '{type_name}'",
                }
            )
        for arg, value in node.args.items():
            if arg not in definition.args:
                raise _Invalid(
                    {
                        "path": [*here, arg],
                        "extensions": {
                            "code": "argumentNotAccepted",
                            "name": node.name,
                            "typeName": "Field",
                            "argumentName": arg,
                        },
                        "locations": _location(node),
                        "message": f"Field '{node.name}' doesn't accept argument '{arg}'",
                    }
                )
            self.collect_vars(value)
        missing = [
            arg
            for arg, kind in definition.args.items()
            if kind.endswith("!") and arg not in node.args
        ]
        if missing:
            raise _Invalid(
                {
                    "path": here,
                    "extensions": {
                        "code": "missingRequiredArguments",
                        "className": "Field",
                        "name": node.name,
                        "arguments": ", ".join(missing),
                    },
                    "locations": _location(node),
                    "message": f"Field '{node.name}' is missing required arguments: "
                    + ", ".join(missing),
                }
            )
        target = _named(definition.type)
        if target in _SCALARS and node.selections:
            raise _Invalid(
                {
                    "path": here,
                    "locations": _location(node),
                    "message": f"Selections can't be made on scalars (field '{node.name}' "
                    f"returns {target} but has selections [...])",
                }
            )
        if target not in _SCALARS:
            if not node.selections:
                raise _Invalid(
                    {
                        "path": here,
                        "locations": _location(node),
                        "message": f"Field must have selections (field '{node.name}' returns "
                        f"{target} but has no selections. Did you mean '{node.name} {{ ... }}'?)",
                    }
                )
            self.selections(target, node.selections, here)

    def collect_vars(self, value: Any) -> None:
        if isinstance(value, Var):
            self.used.add(value.name)
        elif isinstance(value, list):
            for item in value:
                self.collect_vars(item)
        elif isinstance(value, dict):
            for item in value.values():
                self.collect_vars(item)


class _Executor:
    def __init__(
        self,
        doc: Document,
        variables: dict[str, Any],
        resolvers: dict[str, dict[str, Callable[..., Any]]],
    ) -> None:
        self.doc = doc
        self.variables = variables
        self.resolvers = resolvers
        self.errors: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (root field, its arguments)

    def value(self, raw: Any) -> Any:
        if isinstance(raw, Var):
            return self.variables.get(raw.name)
        if isinstance(raw, EnumValue):
            return raw.value
        if isinstance(raw, list):
            return [self.value(item) for item in raw]
        if isinstance(raw, dict):
            return {key: self.value(item) for key, item in raw.items()}
        return raw

    def fields(self, type_name: str, selections: list[Selection]) -> list[Field]:
        """The fields that apply to an object of `type_name`, fragments flattened."""
        found: list[Field] = []
        for selection in selections:
            if isinstance(selection, Field):
                found.append(selection)
                continue
            fragment = (
                self.doc.fragments[selection.name]
                if isinstance(selection, FragmentSpread)
                else selection
            )
            condition = fragment.type_condition
            if (
                condition is None
                or condition == type_name
                or condition in _IMPLEMENTS.get(type_name, set())
            ):
                found.extend(self.fields(type_name, fragment.selections))
        return found

    def object(self, obj: Obj, selections: list[Selection], path: list[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for node in self.fields(obj.type, selections):
            here = [*path, node.key]
            if node.name == "__typename":
                out[node.key] = obj.type
                continue
            definition = SCHEMA[obj.type][node.name]
            args = {key: self.value(raw) for key, raw in node.args.items()}
            if obj.type in ("Query", "Mutation"):
                self.calls.append((node.name, args))  # what a test counts: "two resolved"
            try:
                _check_inputs(definition, args)
                value = self.resolvers[obj.type][node.name](obj.data, args, node)
            except FieldError as exc:
                self.errors.append(
                    {
                        "type": exc.kind,
                        "path": here,
                        "locations": _location(node),
                        "message": exc.message,
                    }
                )
                out[node.key] = None
                continue
            out[node.key] = self.complete(definition.type, value, node, here)
        return out

    def complete(self, type_ref: str, value: Any, node: Field, path: list[Any]) -> Any:
        if value is None:
            return None
        if _is_list(type_ref):
            inner = type_ref.rstrip("!")[1:-1]
            return [self.complete(inner, item, node, [*path, i]) for i, item in enumerate(value)]
        if _named(type_ref) in _SCALARS:
            return value
        assert isinstance(value, Obj), f"{node.name} resolved to a {type(value).__name__}"
        return self.object(value, node.selections, path)


def _check_inputs(definition: FieldDef, args: dict[str, Any]) -> None:
    for arg, kind in definition.args.items():
        shape = _INPUTS.get(_named(kind))
        if shape is None or arg not in args:
            continue
        given = args[arg]
        if not isinstance(given, dict):
            raise FieldError("INVALID", f"Argument '{arg}' must be an input object {_named(kind)}")
        for key in given:
            if key not in shape:
                raise FieldError(
                    "INVALID", f"InputObject '{_named(kind)}' doesn't accept argument '{key}'"
                )
        for key, key_kind in shape.items():
            if key_kind.endswith("!") and given.get(key) is None:
                raise FieldError(
                    "INVALID",
                    f"Argument '{key}' on InputObject '{_named(kind)}' is required. "
                    f"Expected type {key_kind}",
                )


def execute(
    fake: FakeGitHub, query: Any, variables: Any, operation_name: Any = None
) -> dict[str, Any]:
    """GitHub's answer to one `POST /graphql` body (always sent with HTTP 200)."""
    if not isinstance(query, str) or not query.strip():
        return {
            "errors": [{"message": "A query attribute must be specified and must be a string."}]
        }
    if variables is not None and not isinstance(variables, dict):
        return {"errors": [{"message": "Variables are invalid JSON."}]}
    try:
        doc = parse(query)
    except GraphQLSyntaxError as exc:
        return {
            "errors": [
                {"message": str(exc), "locations": [{"line": exc.line, "column": exc.column}]}
            ]
        }
    operations = [op for op in doc.operations if operation_name in (None, op.name)]
    if len(operations) != 1:
        message = (
            f'No operation named "{operation_name}"'
            if operation_name is not None
            else "An operation name is required"
        )
        return {"errors": [{"message": message}]}
    (operation,) = operations
    root = "Mutation" if operation.kind == "mutation" else "Query"
    validator = _Validator(doc, operation)
    try:
        validator.selections(root, operation.selections, [])
        for name in sorted(validator.used):
            if name not in operation.variables:
                raise _Invalid(
                    {
                        "path": [f"{operation.kind} {operation.name or ''}".strip()],
                        "extensions": {"code": "variableNotDefined", "variableName": name},
                        "locations": _location(operation),
                        "message": f"Variable ${name} is used by "
                        f"{operation.name or 'anonymous ' + operation.kind} but not declared",
                    }
                )
        given = dict(variables or {})
        for var in operation.variables.values():
            if var.name not in given and var.has_default:
                given[var.name] = var.default
            if var.type.endswith("!") and given.get(var.name) is None:
                raise _Invalid(
                    {
                        "extensions": {
                            "value": None,
                            "problems": [
                                {"path": [], "explanation": "Expected value to not be null"}
                            ],
                        },
                        "locations": _location(operation),
                        "message": f"Variable ${var.name} of type {var.type} was provided "
                        "invalid value",
                    }
                )
    except _Invalid as exc:
        return {"errors": [exc.error]}
    executor = _Executor(doc, given, _Resolvers(fake).table())
    data = executor.object(Obj(root, None), operation.selections, [])
    fake.graphql_calls.extend(executor.calls)
    answer: dict[str, Any] = {"data": data}
    if executor.errors:
        answer["errors"] = executor.errors
    return answer


# -- GitHub's objects, from the fake's state -------------------------------------------


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _offset(cursor: Any) -> int | None:
    try:
        text = base64.b64decode(str(cursor), validate=True).decode()
    except ValueError:
        return None
    prefix = "cursor:v2:"
    return (
        int(text[len(prefix) :])
        if text.startswith(prefix) and text[len(prefix) :].isdigit()
        else None
    )


class _Resolvers:
    """Field resolvers over the fake's records; the fake's lock is held by the caller."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake

    def table(self) -> dict[str, dict[str, Callable[..., Any]]]:
        f = self.fake

        def user(login: str | None) -> Obj | None:
            return None if login is None else Obj("User", login)

        def pull_parts(data: tuple[FakeRepo, dict[str, Any]]) -> dict[str, Any]:
            repo, pull = data
            return f.pull_json(repo.full_name, pull["number"])

        return {
            "Query": {
                "repository": self.repository,
                "node": lambda _d, a, _n: self.node(a["id"]),
                "viewer": lambda _d, _a, _n: Obj("User", f.login),
            },
            "Mutation": {
                "resolveReviewThread": lambda _d, a, _n: Obj(
                    "ResolveReviewThreadPayload", self.resolve(a["input"], True)
                ),
                "unresolveReviewThread": lambda _d, a, _n: Obj(
                    "UnresolveReviewThreadPayload", self.resolve(a["input"], False)
                ),
                "markPullRequestReadyForReview": lambda _d, a, _n: Obj(
                    "MarkPullRequestReadyForReviewPayload", self.draft(a["input"], False)
                ),
                "convertPullRequestToDraft": lambda _d, a, _n: Obj(
                    "ConvertPullRequestToDraftPayload", self.draft(a["input"], True)
                ),
            },
            "User": {
                "id": lambda d, _a, _n: f.user_json(d)["node_id"],
                "login": lambda d, _a, _n: d,
                "url": lambda d, _a, _n: f.user_json(d)["html_url"],
            },
            "Repository": {
                "id": lambda d, _a, _n: f.repo_json(d.full_name)["node_id"],
                "name": lambda d, _a, _n: d.name,
                "nameWithOwner": lambda d, _a, _n: d.full_name,
                "url": lambda d, _a, _n: f.repo_json(d.full_name)["html_url"],
                "pullRequest": self.pull_request,
            },
            "PullRequest": {
                "id": lambda d, _a, _n: d[1]["node_id"],
                "databaseId": lambda d, _a, _n: d[1]["id"],
                "number": lambda d, _a, _n: d[1]["number"],
                "title": lambda d, _a, _n: d[1]["title"],
                "url": lambda d, _a, _n: d[1]["html_url"],
                "isDraft": lambda d, _a, _n: bool(d[1]["draft"]),
                "state": lambda d, _a, _n: "MERGED" if d[1]["merged_at"] else d[1]["state"].upper(),
                "merged": lambda d, _a, _n: d[1]["merged_at"] is not None,
                "closed": lambda d, _a, _n: d[1]["state"] == "closed",
                "headRefName": lambda d, _a, _n: d[1]["head"]["ref"],
                "headRefOid": lambda d, _a, _n: pull_parts(d)["head"]["sha"],
                "baseRefName": lambda d, _a, _n: d[1]["base"]["ref"],
                "reviewDecision": lambda d, _a, _n: f.review_decision(
                    d[0].full_name, d[1]["number"]
                ),
                "author": lambda d, _a, _n: user(d[1]["user"]),
                "reviewThreads": self.threads,
            },
            "PullRequestReviewThreadConnection": self.connection("PullRequestReviewThread"),
            "PullRequestReviewCommentConnection": self.connection("PullRequestReviewComment"),
            "PullRequestReviewThreadEdge": {
                "node": lambda d, _a, _n: d[1],
                "cursor": lambda d, _a, _n: _cursor(d[0]),
            },
            "PullRequestReviewCommentEdge": {
                "node": lambda d, _a, _n: d[1],
                "cursor": lambda d, _a, _n: _cursor(d[0]),
            },
            "PullRequestReviewThread": {
                "id": lambda d, _a, _n: d[1]["id"],
                "isResolved": lambda d, _a, _n: d[1]["resolved"],
                "isOutdated": lambda d, _a, _n: f.thread_outdated(d[0], d[1]),
                "isCollapsed": lambda d, _a, _n: d[1]["resolved"],
                "path": lambda d, _a, _n: d[1]["path"],
                "line": lambda d, _a, _n: d[1]["line"],
                "originalLine": lambda d, _a, _n: d[1]["line"],
                "startLine": lambda d, _a, _n: None,
                "diffSide": lambda d, _a, _n: "RIGHT",
                "viewerCanResolve": lambda d, _a, _n: True,
                "viewerCanReply": lambda d, _a, _n: True,
                "resolvedBy": lambda d, _a, _n: user(d[1]["resolved_by"]),
                "pullRequest": lambda d, _a, _n: Obj(
                    "PullRequest", (d[0], f.find_pull(d[0], d[1]["_pull"]))
                ),
                "comments": self.thread_comments,
            },
            "PullRequestReviewComment": {
                "id": lambda d, _a, _n: d[1]["node_id"],
                "databaseId": lambda d, _a, _n: d[1]["id"],
                "body": lambda d, _a, _n: d[1]["body"],
                "path": lambda d, _a, _n: d[1]["path"],
                "line": lambda d, _a, _n: d[1]["line"],
                "originalLine": lambda d, _a, _n: d[1]["line"],
                "url": lambda d, _a, _n: f.review_comment_json(d[0], d[1])["html_url"],
                "createdAt": lambda d, _a, _n: d[1]["created_at"],
                "author": lambda d, _a, _n: user(d[1]["user"]),
                "replyTo": lambda d, _a, _n: (
                    None
                    if d[1]["in_reply_to_id"] is None
                    else Obj(
                        "PullRequestReviewComment",
                        (d[0], d[0].review_comments[d[1]["in_reply_to_id"]]),
                    )
                ),
                "pullRequestReview": lambda d, _a, _n: Obj(
                    "PullRequestReview", (d[0], d[0].reviews[d[1]["pull_request_review_id"]])
                ),
                "commit": lambda d, _a, _n: Obj("Commit", d[1]["commit_id"]),
            },
            "PullRequestReview": {
                "id": lambda d, _a, _n: d[1]["node_id"],
                "databaseId": lambda d, _a, _n: d[1]["id"],
                "state": lambda d, _a, _n: d[1]["state"],
                "body": lambda d, _a, _n: d[1]["body"],
                "author": lambda d, _a, _n: user(d[1]["user"]),
            },
            "Commit": {"oid": lambda d, _a, _n: d},
            "PageInfo": {
                "hasNextPage": lambda d, _a, _n: d["end"] < d["total"],
                "hasPreviousPage": lambda d, _a, _n: d["start"] > 0,
                "startCursor": lambda d, _a, _n: (
                    _cursor(d["start"]) if d["end"] > d["start"] else None
                ),
                "endCursor": lambda d, _a, _n: (
                    _cursor(d["end"] - 1) if d["end"] > d["start"] else None
                ),
            },
            "ResolveReviewThreadPayload": self.payload("thread"),
            "UnresolveReviewThreadPayload": self.payload("thread"),
            "MarkPullRequestReadyForReviewPayload": self.payload("pullRequest"),
            "ConvertPullRequestToDraftPayload": self.payload("pullRequest"),
        }

    @staticmethod
    def payload(key: str) -> dict[str, Callable[..., Any]]:
        return {
            "clientMutationId": lambda d, _a, _n: d.get("clientMutationId"),
            key: lambda d, _a, _n: d[key],
        }

    @staticmethod
    def connection(node_type: str) -> dict[str, Callable[..., Any]]:
        def items(d: dict[str, Any]) -> list[tuple[int, Obj]]:
            return [
                (d["start"] + i, Obj(node_type, (d["repo"], item)))
                for i, item in enumerate(d["items"][d["start"] : d["end"]])
            ]

        return {
            "nodes": lambda d, _a, _n: [obj for _i, obj in items(d)],
            "edges": lambda d, _a, _n: [Obj(f"{node_type}Edge", item) for item in items(d)],
            "pageInfo": lambda d, _a, _n: Obj("PageInfo", d),
            "totalCount": lambda d, _a, _n: d["total"],
        }

    def page(self, repo: FakeRepo, items: list[Any], args: dict[str, Any], name: str) -> Obj:
        first, last = args.get("first"), args.get("last")
        if first is None and last is None:
            raise FieldError(
                "MISSING_PAGINATION_BOUNDARIES",
                f"You must provide a `first` or `last` value to properly paginate the `{name}` "
                "connection.",
            )
        for which, count in (("first", first), ("last", last)):
            if count is not None and (not isinstance(count, int) or count > _MAX_PAGE or count < 0):
                raise FieldError(
                    "EXCESSIVE_PAGINATION",
                    f"Requesting {count} records on the `{name}` connection exceeds the "
                    f"`{which}` limit of {_MAX_PAGE} records.",
                )
        start, end = 0, len(items)
        if args.get("after") is not None:
            after = _offset(args["after"])
            start = end if after is None else min(after + 1, end)
        if args.get("before") is not None:
            before = _offset(args["before"])
            end = start if before is None else max(min(before, end), start)
        if first is not None:
            end = min(end, start + first)
        if last is not None:
            start = max(start, end - last)
        kind = "PullRequestReviewThreadConnection"
        if name == "comments":
            kind = "PullRequestReviewCommentConnection"
        return Obj(
            kind, {"repo": repo, "items": items, "start": start, "end": end, "total": len(items)}
        )

    def repository(self, _data: Any, args: dict[str, Any], _node: Field) -> Obj:
        repo = self.fake.repos.get(f"{args['owner']}/{args['name']}".lower())
        if repo is None:
            raise FieldError(
                "NOT_FOUND",
                "Could not resolve to a Repository with the name "
                f"'{args['owner']}/{args['name']}'.",
            )
        return Obj("Repository", repo)

    def pull_request(self, repo: FakeRepo, args: dict[str, Any], _node: Field) -> Obj:
        pull = self.fake.find_pull(repo, args["number"])
        if pull is None:
            raise FieldError(
                "NOT_FOUND",
                f"Could not resolve to a PullRequest with the number of {args['number']}.",
            )
        self.fake.refresh_heads(repo)
        return Obj("PullRequest", (repo, pull))

    def threads(
        self, data: tuple[FakeRepo, dict[str, Any]], args: dict[str, Any], _n: Field
    ) -> Obj:
        repo, pull = data
        items = [t for t in repo.threads.values() if t["_pull"] == pull["number"]]
        return self.page(repo, items, args, "reviewThreads")

    def thread_comments(
        self, data: tuple[FakeRepo, dict[str, Any]], args: dict[str, Any], _n: Field
    ) -> Obj:
        repo, thread = data
        items = [repo.review_comments[i] for i in thread["comments"]]
        return self.page(repo, items, args, "comments")

    def node(self, node_id: str) -> Obj:
        found = self.fake.find_node(node_id)
        if found is None:
            raise FieldError(
                "NOT_FOUND", f"Could not resolve to a node with the global id of '{node_id}'"
            )
        kind, repo, record = found
        if kind == "Repository":
            return Obj("Repository", repo)
        return Obj(kind, (repo, record))

    def resolve(self, given: dict[str, Any], resolved: bool) -> dict[str, Any]:
        thread_id = given["threadId"]
        found = self.fake.find_node(thread_id)
        if found is None or found[0] != "PullRequestReviewThread":
            raise FieldError(
                "NOT_FOUND", f"Could not resolve to a node with the global id of '{thread_id}'"
            )
        _kind, repo, thread = found
        thread["resolved"] = resolved
        thread["resolved_by"] = self.fake.login if resolved else None
        return {
            "clientMutationId": given.get("clientMutationId"),
            "thread": Obj("PullRequestReviewThread", (repo, thread)),
        }

    def draft(self, given: dict[str, Any], draft: bool) -> dict[str, Any]:
        pull_id = given["pullRequestId"]
        found = self.fake.find_node(pull_id)
        if found is None or found[0] != "PullRequest":
            raise FieldError(
                "NOT_FOUND", f"Could not resolve to a node with the global id of '{pull_id}'"
            )
        _kind, repo, pull = found
        if pull["state"] != "open":
            raise FieldError("UNPROCESSABLE", "Pull request is closed")
        self.fake.set_draft(repo.full_name, pull["number"], draft)
        return {
            "clientMutationId": given.get("clientMutationId"),
            "pullRequest": Obj("PullRequest", (repo, pull)),
        }
