"""GitHub's GraphQL endpoint for the loopback GitHub: graphql-core over a slice of its schema.

Why a real GraphQL implementation and not regexes: the daemon's queries are
ordinary GraphQL (variables, aliases, fragments), and a fake that answers
whatever string contains `resolveReviewThread` would accept queries GitHub
refuses. graphql-core (the reference implementation) parses and validates the
document against the slice of GitHub's schema below, then runs it over the
fake's records. As GitHub does:

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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphql import (
    DocumentNode,
    FieldNode,
    FieldsOnCorrectTypeRule,
    GraphQLError,
    KnownArgumentNamesRule,
    Lexer,
    NoUndefinedVariablesRule,
    ProvidedRequiredArgumentsRule,
    Source,
    TokenKind,
    ValidationRule,
    build_schema,
    execute_sync,
    parse,
    specified_rules,
    validate,
)

if TYPE_CHECKING:
    from tests.fakes.github_api import FakeGitHub, FakeRepo

__all__ = ["execute"]

_PAGING = "first: Int, last: Int, after: String, before: String"
SCHEMA = build_schema(f"""
scalar DateTime
scalar URI
scalar GitObjectID
enum PullRequestState {{ OPEN CLOSED MERGED }}
enum PullRequestReviewDecision {{ APPROVED CHANGES_REQUESTED REVIEW_REQUIRED }}
enum PullRequestReviewState {{ PENDING COMMENTED APPROVED CHANGES_REQUESTED DISMISSED }}
enum DiffSide {{ LEFT RIGHT }}

interface Node {{ id: ID! }}
interface Actor {{ login: String! url: URI! }}

type Query {{
  repository(owner: String!, name: String!): Repository
  node(id: ID!): Node
  viewer: User!
}}
type Mutation {{
  resolveReviewThread(input: ResolveReviewThreadInput!): ResolveReviewThreadPayload
  unresolveReviewThread(input: UnresolveReviewThreadInput!): UnresolveReviewThreadPayload
  markPullRequestReadyForReview(
    input: MarkPullRequestReadyForReviewInput!
  ): MarkPullRequestReadyForReviewPayload
  convertPullRequestToDraft(
    input: ConvertPullRequestToDraftInput!
  ): ConvertPullRequestToDraftPayload
}}

type User implements Node & Actor {{ id: ID! login: String! url: URI! }}
type Repository implements Node {{
  id: ID! name: String! nameWithOwner: String! url: URI!
  pullRequest(number: Int!): PullRequest
}}
type PullRequest implements Node {{
  id: ID! databaseId: Int number: Int! title: String! url: URI! isDraft: Boolean!
  state: PullRequestState! merged: Boolean! closed: Boolean!
  headRefName: String! headRefOid: GitObjectID! baseRefName: String!
  reviewDecision: PullRequestReviewDecision author: Actor
  reviewThreads({_PAGING}): PullRequestReviewThreadConnection!
}}
type PullRequestReviewThread implements Node {{
  id: ID! isResolved: Boolean! isOutdated: Boolean! isCollapsed: Boolean! path: String!
  line: Int originalLine: Int startLine: Int diffSide: DiffSide!
  viewerCanResolve: Boolean! viewerCanReply: Boolean! resolvedBy: User pullRequest: PullRequest!
  comments({_PAGING}): PullRequestReviewCommentConnection!
}}
type PullRequestReviewComment implements Node {{
  id: ID! databaseId: Int body: String! path: String! line: Int originalLine: Int url: URI!
  createdAt: DateTime! author: Actor replyTo: PullRequestReviewComment
  pullRequestReview: PullRequestReview commit: Commit
}}
type PullRequestReview implements Node {{
  id: ID! databaseId: Int state: PullRequestReviewState! body: String! author: Actor
}}
type Commit {{ oid: GitObjectID! }}

type PullRequestReviewThreadConnection {{
  nodes: [PullRequestReviewThread] edges: [PullRequestReviewThreadEdge]
  pageInfo: PageInfo! totalCount: Int!
}}
type PullRequestReviewThreadEdge {{ node: PullRequestReviewThread cursor: String! }}
type PullRequestReviewCommentConnection {{
  nodes: [PullRequestReviewComment] edges: [PullRequestReviewCommentEdge]
  pageInfo: PageInfo! totalCount: Int!
}}
type PullRequestReviewCommentEdge {{ node: PullRequestReviewComment cursor: String! }}
type PageInfo {{
  hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String endCursor: String
}}

input ResolveReviewThreadInput {{ threadId: ID! clientMutationId: String }}
input UnresolveReviewThreadInput {{ threadId: ID! clientMutationId: String }}
input MarkPullRequestReadyForReviewInput {{ pullRequestId: ID! clientMutationId: String }}
input ConvertPullRequestToDraftInput {{ pullRequestId: ID! clientMutationId: String }}
type ResolveReviewThreadPayload {{
  clientMutationId: String thread: PullRequestReviewThread
}}
type UnresolveReviewThreadPayload {{
  clientMutationId: String thread: PullRequestReviewThread
}}
type MarkPullRequestReadyForReviewPayload {{ clientMutationId: String pullRequest: PullRequest }}
type ConvertPullRequestToDraftPayload {{ clientMutationId: String pullRequest: PullRequest }}
""")
_MAX_PAGE = 100


class FieldError(GraphQLError):
    """A field that cannot be resolved: it becomes null, with a typed error beside it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message, extensions={"type": kind})


# -- validation: graphql-core's rules, GitHub's codes and its paging rule -----------


class _PaginationBoundaries(ValidationRule):
    """A connection needs `first` or `last`: GitHub refuses the query before running it."""

    def enter_field(self, node: FieldNode, *_args: Any) -> None:
        definition = self.context.get_field_def()
        given = {argument.name.value for argument in node.arguments or ()}
        if definition is not None and "first" in definition.args and not {"first", "last"} & given:
            self.report_error(_unbounded(node.name.value, node))


def _unbounded(name: str, node: FieldNode | None = None) -> GraphQLError:
    message = (
        f"You must provide a `first` or `last` value to properly paginate the `{name}` connection."
    )
    return GraphQLError(message, node, extensions={"type": "MISSING_PAGINATION_BOUNDARIES"})


# GitHub's `extensions.code` for what graphql-core's rules find (clients match on it).
_CODES = {
    FieldsOnCorrectTypeRule: "undefinedField",
    KnownArgumentNamesRule: "argumentNotAccepted",
    ProvidedRequiredArgumentsRule: "missingRequiredArguments",
    NoUndefinedVariablesRule: "variableNotDefined",
}
_RULES = [*(rule for rule in specified_rules if rule not in _CODES), _PaginationBoundaries]


def _invalid(document: DocumentNode) -> list[GraphQLError]:
    """What GitHub refuses before running anything, each with its code where it has one.

    A rule at a time for the coded ones: graphql-core's rules report through the
    context, so an error does not say which rule found it.
    """
    errors = validate(SCHEMA, document, _RULES)
    for rule, code in _CODES.items():
        for error in validate(SCHEMA, document, [rule]):
            error.extensions = {**(error.extensions or {}), "code": code}
            errors.append(error)
    return errors


# -- errors as GitHub words them ---------------------------------------------------------

# The names GitHub's parser (graphql-ruby) gives tokens in "Parse error on ..." messages.
_TOKEN_NAMES = {
    TokenKind.BRACE_L: "LCURLY",
    TokenKind.BRACE_R: "RCURLY",
    TokenKind.PAREN_L: "LPAREN",
    TokenKind.PAREN_R: "RPAREN",
    TokenKind.BRACKET_L: "LBRACKET",
    TokenKind.BRACKET_R: "RBRACKET",
    TokenKind.COLON: "COLON",
    TokenKind.DOLLAR: "VAR_SIGN",
    TokenKind.BANG: "BANG",
    TokenKind.EQUALS: "EQUALS",
    TokenKind.AT: "DIR_SIGN",
    TokenKind.SPREAD: "ELLIPSIS",
    TokenKind.NAME: "IDENTIFIER",
    TokenKind.BLOCK_STRING: "STRING",
}


def _syntax_error(source: str, error: GraphQLError) -> dict[str, Any]:
    """GitHub's words for a document that does not parse, at the token graphql-core stopped at."""
    position = next(iter(error.positions or ()), len(source))
    line, column = error.locations[0] if error.locations else (1, position + 1)
    if position >= len(source):
        message = "Unexpected end of document"
    else:
        try:  # errors point at a token's start: lexing from there reads that token
            token = Lexer(Source(source[position:])).advance()
            text = token.value if token.value is not None else token.kind.value
            label = _TOKEN_NAMES.get(token.kind, token.kind.name)
            message = f'Parse error on "{text}" ({label}) at [{line}, {column}]'
        except GraphQLError:  # not a token at all (a stray character)
            message = f'Parse error on "{source[position]}" at [{line}, {column}]'
    return {"message": message, "locations": [{"line": line, "column": column}]}


def _shaped(error: GraphQLError) -> dict[str, Any]:
    """graphql-core's error with GitHub's top-level `type` (NOT_FOUND...) where it has one."""
    shaped: dict[str, Any] = dict(error.formatted)
    extensions = dict(shaped.pop("extensions", None) or {})
    if "type" in extensions:
        shaped["type"] = extensions.pop("type")
    if extensions:
        shaped["extensions"] = extensions
    return shaped


# -- the entry point -------------------------------------------------------------------


def execute(
    fake: FakeGitHub, query: Any, variables: Any, operation_name: Any = None
) -> dict[str, Any]:
    """GitHub's answer to one `POST /graphql` body (always sent with HTTP 200).

    `graphql_sync`'s three steps, taken one at a time: the parse error gets GitHub's
    words, validation gets GitHub's codes and paging rule, and a request refused
    before it ran comes back without `data`.
    """
    if not isinstance(query, str) or not query.strip():
        return {
            "errors": [{"message": "A query attribute must be specified and must be a string."}]
        }
    if variables is not None and not isinstance(variables, dict):
        return {"errors": [{"message": "Variables are invalid JSON."}]}
    try:
        document = parse(query)
    except GraphQLError as error:
        return {"errors": [_syntax_error(query, error)]}
    invalid = _invalid(document)
    if invalid:
        return {"errors": [_shaped(error) for error in invalid]}

    def record(resolve: Callable[..., Any], source: Any, info: Any, **args: Any) -> Any:
        if info.path.prev is None and not info.field_name.startswith("__"):
            fake.graphql_calls.append((info.field_name, args))  # what a test counts
        return resolve(source, info, **args)

    result = execute_sync(
        SCHEMA,
        document,
        root_value=_World(fake).root(),
        variable_values=variables,
        operation_name=operation_name,
        middleware=[record],
    )
    errors = result.errors or []
    for failed in errors:  # a bug in the fake fails the test, not hides in "errors"
        if failed.original_error and not isinstance(failed.original_error, GraphQLError):
            raise failed.original_error
    answer: dict[str, Any] = {}
    # Errors without a path came before execution (variables, operation name): no data.
    if result.data is not None or any(failed.path for failed in errors):
        answer["data"] = result.data
    if errors:
        answer["errors"] = [_shaped(failed) for failed in errors]
    return answer


# -- GitHub's objects, from the fake's state -------------------------------------------


def _cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _offset(cursor: str) -> int | None:
    try:
        text = base64.b64decode(cursor, validate=True).decode()
    except ValueError:
        return None
    number = text.removeprefix("cursor:v2:")
    return int(number) if number != text and number.isdigit() else None


def _not_found(node_id: str) -> FieldError:
    return FieldError("NOT_FOUND", f"Could not resolve to a node with the global id of '{node_id}'")


class _World:
    """GitHub's objects over the fake's records; the fake's lock is held by the caller.

    Each object is a dict that graphql-core's default resolver reads: `__typename`
    names the type behind an interface (`node`, `author`), and a callable value
    `(info, **args)` runs only when its field is selected (some run git).
    """

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake

    def root(self) -> dict[str, Any]:
        return {
            "repository": lambda _i, owner, name: self.repository(owner, name),
            "node": lambda _i, id: self.node(id),
            "viewer": lambda _i: self.user(self.fake.login),
            "resolveReviewThread": lambda _i, input: self.resolve(input, True),
            "unresolveReviewThread": lambda _i, input: self.resolve(input, False),
            "markPullRequestReadyForReview": lambda _i, input: self.draft(input, False),
            "convertPullRequestToDraft": lambda _i, input: self.draft(input, True),
        }

    def user(self, login: str | None) -> dict[str, Any] | None:
        if login is None:
            return None
        shown = self.fake.user_json(login)
        return {
            "__typename": "User",
            "id": shown["node_id"],
            "login": login,
            "url": shown["html_url"],
        }

    def repo(self, repo: FakeRepo, _record: Any = None) -> dict[str, Any]:
        shown = self.fake.repo_json(repo.full_name)
        return {
            "__typename": "Repository",
            "id": shown["node_id"],
            "name": repo.name,
            "nameWithOwner": repo.full_name,
            "url": shown["html_url"],
            "pullRequest": lambda _i, number: self.pull_request(repo, number),
        }

    def pull(self, repo: FakeRepo, pull: dict[str, Any]) -> dict[str, Any]:
        f, number = self.fake, pull["number"]
        return {
            "__typename": "PullRequest",
            "id": pull["node_id"],
            "databaseId": pull["id"],
            "number": number,
            "title": pull["title"],
            "url": pull["html_url"],
            "isDraft": bool(pull["draft"]),
            "state": "MERGED" if pull["merged_at"] else pull["state"].upper(),
            "merged": pull["merged_at"] is not None,
            "closed": pull["state"] == "closed",
            "headRefName": pull["head"]["ref"],
            "headRefOid": lambda _i: f.pull_json(repo.full_name, number)["head"]["sha"],
            "baseRefName": pull["base"]["ref"],
            "reviewDecision": lambda _i: f.review_decision(repo.full_name, number),
            "author": self.user(pull["user"]),
            "reviewThreads": lambda _i, **paging: self.page(
                "reviewThreads",
                [t for t in repo.threads.values() if t["_pull"] == number],
                paging,
                lambda thread: self.thread(repo, thread),
            ),
        }

    def thread(self, repo: FakeRepo, thread: dict[str, Any]) -> dict[str, Any]:
        return {
            "__typename": "PullRequestReviewThread",
            "id": thread["id"],
            "isResolved": thread["resolved"],
            "isOutdated": lambda _i: self.fake.thread_outdated(repo, thread),
            "isCollapsed": thread["resolved"],
            "path": thread["path"],
            "line": thread["line"],
            "originalLine": thread["line"],
            "startLine": None,
            "diffSide": "RIGHT",
            "viewerCanResolve": True,
            "viewerCanReply": True,
            "resolvedBy": self.user(thread["resolved_by"]),
            "pullRequest": lambda _i: self.pull_request(repo, thread["_pull"]),
            "comments": lambda _i, **paging: self.page(
                "comments",
                [repo.review_comments[i] for i in thread["comments"]],
                paging,
                lambda comment: self.comment(repo, comment),
            ),
        }

    def comment(self, repo: FakeRepo, comment: dict[str, Any]) -> dict[str, Any]:
        reply_to = comment["in_reply_to_id"]
        return {
            "__typename": "PullRequestReviewComment",
            "id": comment["node_id"],
            "databaseId": comment["id"],
            "body": comment["body"],
            "path": comment["path"],
            "line": comment["line"],
            "originalLine": comment["line"],
            "url": lambda _i: self.fake.review_comment_json(repo, comment)["html_url"],
            "createdAt": comment["created_at"],
            "author": self.user(comment["user"]),
            "replyTo": lambda _i: (
                None if reply_to is None else self.comment(repo, repo.review_comments[reply_to])
            ),
            "pullRequestReview": lambda _i: self.review(
                repo, repo.reviews[comment["pull_request_review_id"]]
            ),
            "commit": {"oid": comment["commit_id"]},
        }

    def review(self, _repo: FakeRepo, review: dict[str, Any]) -> dict[str, Any]:
        return {
            "__typename": "PullRequestReview",
            "id": review["node_id"],
            "databaseId": review["id"],
            "state": review["state"],
            "body": review["body"],
            "author": self.user(review["user"]),
        }

    @staticmethod
    def page(
        name: str, items: list[Any], paging: dict[str, Any], make: Callable[[Any], Any]
    ) -> dict[str, Any]:
        """One page of a connection, by GitHub's cursor rules and limits."""
        first, last = paging.get("first"), paging.get("last")
        if first is None and last is None:  # `first: $n` with $n null; a literal is refused earlier
            raise FieldError("MISSING_PAGINATION_BOUNDARIES", _unbounded(name).message)
        for which, count in (("first", first), ("last", last)):
            if count is not None and not 0 <= count <= _MAX_PAGE:
                raise FieldError(
                    "EXCESSIVE_PAGINATION",
                    f"Requesting {count} records on the `{name}` connection exceeds the "
                    f"`{which}` limit of {_MAX_PAGE} records.",
                )
        start, end = 0, len(items)
        if paging.get("after") is not None:
            after = _offset(paging["after"])
            start = end if after is None else min(after + 1, end)
        if paging.get("before") is not None:
            before = _offset(paging["before"])
            end = start if before is None else max(min(before, end), start)
        if first is not None:
            end = min(end, start + first)
        if last is not None:
            start = max(start, end - last)
        shown = [(start + i, make(item)) for i, item in enumerate(items[start:end])]
        return {
            "nodes": [node for _index, node in shown],
            "edges": [{"node": node, "cursor": _cursor(index)} for index, node in shown],
            "pageInfo": {
                "hasNextPage": end < len(items),
                "hasPreviousPage": start > 0,
                "startCursor": _cursor(start) if shown else None,
                "endCursor": _cursor(end - 1) if shown else None,
            },
            "totalCount": len(items),
        }

    def repository(self, owner: str, name: str) -> dict[str, Any]:
        repo = self.fake.repos.get(f"{owner}/{name}".lower())
        if repo is None:
            raise FieldError(
                "NOT_FOUND", f"Could not resolve to a Repository with the name '{owner}/{name}'."
            )
        return self.repo(repo)

    def pull_request(self, repo: FakeRepo, number: int) -> dict[str, Any]:
        pull = self.fake.find_pull(repo, number)
        if pull is None:
            raise FieldError(
                "NOT_FOUND", f"Could not resolve to a PullRequest with the number of {number}."
            )
        self.fake.refresh_heads(repo)
        return self.pull(repo, pull)

    def find(self, node_id: str, kind: str | None = None) -> tuple[str, FakeRepo, Any]:
        """What a global id names (of type `kind`, if given); NOT_FOUND otherwise."""
        found = self.fake.find_node(node_id)
        if found is None or kind not in (None, found[0]):
            raise _not_found(node_id)
        return found

    def node(self, node_id: str) -> dict[str, Any]:
        kind, repo, record = self.find(node_id)
        make: dict[str, Callable[[FakeRepo, Any], dict[str, Any]]] = {
            "Repository": self.repo,
            "PullRequest": self.pull,
            "PullRequestReviewThread": self.thread,
            "PullRequestReviewComment": self.comment,
            "PullRequestReview": self.review,
        }
        return make[kind](repo, record)

    def resolve(self, given: dict[str, Any], resolved: bool) -> dict[str, Any]:
        _kind, repo, thread = self.find(given["threadId"], "PullRequestReviewThread")
        thread["resolved"] = resolved
        thread["resolved_by"] = self.fake.login if resolved else None
        return {
            "clientMutationId": given.get("clientMutationId"),
            "thread": self.thread(repo, thread),
        }

    def draft(self, given: dict[str, Any], draft: bool) -> dict[str, Any]:
        _kind, repo, pull = self.find(given["pullRequestId"], "PullRequest")
        if pull["state"] != "open":
            raise FieldError("UNPROCESSABLE", "Pull request is closed")
        self.fake.set_draft(repo.full_name, pull["number"], draft)
        return {
            "clientMutationId": given.get("clientMutationId"),
            "pullRequest": self.pull(repo, pull),
        }
