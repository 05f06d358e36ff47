"""The release request's lifecycle: one transition table, and who may do what; and the tables
of a reproduction's states and of an attacker file's linkage.

``TRANSITIONS`` maps (state, action) to the next state and to who may act. Every action is
asked through two functions made from the table and the action's conditions:

* ``can(action, user, request) -> bool`` for pages (and :func:`buttons`, which also gives
  the reason a button is disabled);
* ``check(action, user, request)`` for services, raising ``Http404`` when the request is out
  of the user's sight, ``PermissionDenied`` when the user may not do this, and
  ``InvalidInput`` when the request's state (or a condition, such as a vote already cast)
  stops it, each with a sentence for the person.

``can_<action>`` / ``check_<action>`` name them for every action a person takes, and for
those of the worker that the code asks by name.

Services never re-derive these rules, and neither do views or templates. The worker's steps
(``start_run``, ``finish_run``, ``fail_run``, ``retry_run``, ``expire``) are actions of the system: their
user is ``None``.

An approved release whose expiry date has passed is treated as expired here (its
:attr:`~releases.models.ReleaseRequest.effective_state`) even before the state is written, so
it can never be downloaded a day too late.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.http import Http404

from releases.background.rules import SYSTEM, Table, Transition
from releases.core import roles
from releases.core.errors import InvalidInput
from releases.models import AttackerFile, ReleaseRequest, Reproduction, Review, TermsAcceptance
from releases.requests import kinds

State = ReleaseRequest.State
Kind = ReleaseRequest.Kind

# --- Who ---------------------------------------------------------------------------------------

REQUESTER = "requester"
REQUESTER_OR_OFFICER = "requester or officer"
REVIEWER = "reviewer"
OFFICER = "officer"
RECEIVER = "receiver"


def is_requester(user, release_request: ReleaseRequest) -> bool:
    return user is not None and release_request.requested_by_id == user.pk


def project_of(release_request: ReleaseRequest) -> int:
    """The id of the project the request's dataset belongs to."""
    return release_request.dataset.project_id


def is_project_officer(user, release_request: ReleaseRequest) -> bool:
    """An officer of the request's project: only they review it and see it as officers."""
    return roles.has_role(user, roles.OFFICER, project_of(release_request))


def is_project_steward_requester(user, release_request: ReleaseRequest) -> bool:
    """The requester, still a steward of the request's project."""
    return is_requester(user, release_request) and roles.has_role(
        user, roles.STEWARD, project_of(release_request)
    )


def is_named_recipient(user, release_request: ReleaseRequest) -> bool:
    """Named on the release, directly or through a group, and holding the recipient role."""
    if user is None or not user.is_authenticated or not roles.is_recipient(user):
        return False
    if release_request.recipients.filter(pk=user.pk).exists():
        return True
    return release_request.recipient_groups.filter(user=user).exists()


def _who_refuses(who: str, user, release_request: ReleaseRequest, action: Action) -> str:
    """Why ``user`` may not do ``action`` (empty when they may)."""
    if who == SYSTEM:
        return "" if user is None else f"Only the worker can {action.verb}."
    if user is None or not user.is_authenticated:
        return f"Log in to {action.verb}."
    if who == REQUESTER:
        return (
            "" if is_requester(user, release_request) else f"Only the requester can {action.verb}."
        )
    if who == REQUESTER_OR_OFFICER:
        if is_requester(user, release_request) or is_project_officer(user, release_request):
            return ""
        return f"Only the requester or a privacy officer of the project can {action.verb}."
    if who == REVIEWER:
        if not is_project_officer(user, release_request):
            return "Only the project's privacy officers can review its release requests."
        if is_requester(user, release_request):
            return "Nobody can review a release they requested themselves."
        return ""
    if who == OFFICER:
        if is_project_officer(user, release_request):
            return ""
        return f"Only the project's privacy officers can {action.verb}."
    if who == RECEIVER:
        if is_requester(user, release_request) or is_named_recipient(user, release_request):
            return ""
        return f"Only the recipients named on this release and its requester can {action.verb}."
    raise ValueError(f"Unknown actor {who!r}")


# --- The table ---------------------------------------------------------------------------------


TRANSITIONS: dict[tuple[str, str], Transition] = {
    (State.QUEUED, "start_run"): Transition(State.RUNNING, SYSTEM, "Start the run"),
    (State.RUNNING, "finish_run"): Transition(State.READY, SYSTEM, "Finish the run"),
    (State.RUNNING, "fail_run"): Transition(State.FAILED, SYSTEM, "Fail the run"),
    # The worker running it stopped (killed, out of memory): another attempt, by the sweeper.
    (State.RUNNING, "retry_run"): Transition(State.QUEUED, SYSTEM, "Retry the run"),
    (State.QUEUED, "cancel"): Transition(State.CANCELLED, REQUESTER_OR_OFFICER, "Cancel"),
    (State.RUNNING, "cancel"): Transition(State.CANCELLED, REQUESTER_OR_OFFICER, "Cancel"),
    (State.READY, "approve"): Transition(State.APPROVED, REVIEWER, "Approve"),
    (State.READY, "request_changes"): Transition(
        State.CHANGES_REQUESTED, REVIEWER, "Request changes"
    ),
    (State.READY, "reject"): Transition(State.REJECTED, REVIEWER, "Reject"),
    (State.CHANGES_REQUESTED, "resubmit"): Transition(State.QUEUED, REQUESTER, "Resubmit"),
    (State.FAILED, "resubmit"): Transition(State.QUEUED, REQUESTER, "Resubmit"),
    (State.CANCELLED, "resubmit"): Transition(State.QUEUED, REQUESTER, "Resubmit"),
    (State.READY, "rerun"): Transition(State.QUEUED, REQUESTER, "Re-run with these levels"),
    (State.CHANGES_REQUESTED, "rerun"): Transition(
        State.QUEUED, REQUESTER, "Re-run with these levels"
    ),
    (State.APPROVED, "revoke"): Transition(State.REVOKED, OFFICER, "Revoke"),
    (State.APPROVED, "expire"): Transition(State.EXPIRED, SYSTEM, "Expire"),
    (State.APPROVED, "accept_terms"): Transition(None, RECEIVER, "Accept the terms"),
    (State.APPROVED, "download"): Transition(None, RECEIVER, "Download"),
    (State.READY, "reproduce"): Transition(None, OFFICER, "Reproduce"),
    (State.APPROVED, "reproduce"): Transition(None, OFFICER, "Reproduce"),
    # An attacker file is linked to the extract before the decision (requests.attacker).
    **{
        (state, "attach_attacker_file"): Transition(
            None, REQUESTER_OR_OFFICER, "Attach an attacker file"
        )
        for state in (
            State.QUEUED,
            State.RUNNING,
            State.READY,
            State.CHANGES_REQUESTED,
            State.FAILED,
        )
    },
}

#: Approve needs REQUIRED_APPROVALS votes: below that, an approval leaves the request ready.
PARTIAL_APPROVAL_TARGET = State.READY


# --- Conditions beyond state and role ------------------------------------------------------------


def _not_voted(user, release_request: ReleaseRequest) -> str:
    if release_request.reviews.filter(round=release_request.round, reviewer_id=user.pk).exists():
        return "You have already reviewed this round."
    return ""


def _checks_pass(user, release_request: ReleaseRequest) -> str:
    # The checks read the stored result; which checks is the request's kind's. A check the
    # kind lets an officer accept in writing is enforced by the review service instead.
    kind = kinds.of(release_request)
    acceptable = kind.acceptable_checks()
    failed = [c for c in kind.checks(release_request) if not c.passed and c.name not in acceptable]
    if failed:
        return (
            "This result cannot be approved: its checks did not pass ("
            + "; ".join(f"{c.name}: {c.detail}" for c in failed)
            + ")."
        )
    return _not_voted(user, release_request)


def _other_candidates(user, release_request: ReleaseRequest) -> str:
    """The result lists a candidate other than the one it applies."""
    summary = release_request.summary or {}
    applied = summary.get("levels")
    if any(c.get("levels") != applied for c in summary.get("candidates") or []):
        return ""
    if summary and summary.get("levels") is None:
        return "Mondrian recodes locally: it has no generalization levels to choose from."
    return "The search found no other transformation that satisfies the privacy model."


def _terms_accepted(user, release_request: ReleaseRequest) -> str:
    if has_accepted_terms(user, release_request):
        return ""
    return "Accept the terms of use before the first download."


def _terms_not_yet_accepted(user, release_request: ReleaseRequest) -> str:
    if has_accepted_terms(user, release_request):
        return "You have accepted these terms."
    return ""


def _past_expiry(user, release_request: ReleaseRequest) -> str:
    return "" if release_request.is_past_expiry else "Its expiry date has not passed."


def _no_reproduction_under_way(user, release_request: ReleaseRequest) -> str:
    busy = release_request.reproductions.filter(
        round=release_request.round, state__in=REPRODUCTION_UNDER_WAY
    ).exists()
    if busy:
        return "A reproduction of this round is under way."
    if not release_request.package_sha256:
        return "This round has no package to compare with."
    return ""


def has_accepted_terms(user, release_request: ReleaseRequest) -> bool:
    """Has ``user`` accepted exactly the release's current terms?"""
    if user is None or not user.is_authenticated:
        return False
    return TermsAcceptance.objects.filter(
        request=release_request, user=user, terms_sha256=release_request.terms_sha256
    ).exists()


@dataclass(frozen=True)
class Action:
    name: str
    #: Completes "Only the requester can ..." and "Log in to ...".
    verb: str
    #: Why the state stops it, after "This request is <state>; ".
    state_rule: str
    #: States in which a page shows its button (disabled with the reason outside the table).
    shown_in: frozenset[str]
    guard: Callable[[object, ReleaseRequest], str] | None = None
    #: The kinds of request the action applies to (a page shows no button for the others).
    kinds: frozenset[str] = frozenset(Kind.values)
    #: Why another kind of request does not have it.
    kind_rule: str = ""


_RELEASED = frozenset({State.APPROVED, State.REVOKED, State.EXPIRED})
_REVIEW_RULE = "only a request that is ready for review can be decided."

ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action("start_run", "start a run", "only a queued request can start running.", frozenset()),
        Action("finish_run", "finish a run", "only a running request can finish.", frozenset()),
        Action("fail_run", "fail a run", "only a running request can fail.", frozenset()),
        Action("retry_run", "retry a run", "only a running request can be retried.", frozenset()),
        Action(
            "cancel",
            "cancel a request",
            "only a queued or running request can be cancelled.",
            frozenset({State.QUEUED, State.RUNNING}),
        ),
        Action(
            "approve",
            "review release requests",
            _REVIEW_RULE,
            frozenset({State.READY}),
            _checks_pass,
        ),
        Action(
            "request_changes",
            "review release requests",
            _REVIEW_RULE,
            frozenset({State.READY}),
            _not_voted,
        ),
        Action(
            "reject",
            "review release requests",
            _REVIEW_RULE,
            frozenset({State.READY}),
            _not_voted,
        ),
        Action(
            "resubmit",
            "resubmit a release request",
            "only a request with changes requested, whose run failed or that was cancelled "
            "can be resubmitted.",
            frozenset({State.CHANGES_REQUESTED, State.FAILED, State.CANCELLED}),
        ),
        Action(
            "rerun",
            "re-run a request with a candidate's levels",
            "only a result ready for review or with changes requested can be re-run with "
            "another candidate.",
            frozenset({State.READY, State.CHANGES_REQUESTED}),
            _other_candidates,
        ),
        Action(
            "revoke",
            "revoke a release",
            "only an approved release can be revoked.",
            _RELEASED,
        ),
        Action(
            "expire",
            "expire a release",
            "only an approved release can expire.",
            frozenset(),
            _past_expiry,
        ),
        Action(
            "accept_terms",
            "accept the terms of this release",
            "only an approved release that has not expired or been revoked can be downloaded.",
            _RELEASED,
            _terms_not_yet_accepted,
        ),
        Action(
            "download",
            "download this release",
            "only an approved release that has not expired or been revoked can be downloaded.",
            _RELEASED,
            _terms_accepted,
        ),
        Action(
            "reproduce",
            "reproduce a release",
            "only a result ready for review or an approved release can be reproduced.",
            frozenset({State.READY, *_RELEASED}),
            _no_reproduction_under_way,
            kinds=frozenset({Kind.EXTRACT}),
            kind_rule="A statistics release is not re-run: its noise is drawn once, and drawing "
            "it again would spend the privacy budget again.",
        ),
        Action(
            "attach_attacker_file",
            "attach an attacker file",
            "an attacker file is linked to the extract before the decision: attach it to a "
            "request that is queued, running, ready for review, with changes requested or "
            "whose run failed.",
            frozenset(
                {State.QUEUED, State.RUNNING, State.READY, State.CHANGES_REQUESTED, State.FAILED}
            ),
            kinds=frozenset({Kind.EXTRACT}),
            kind_rule="A statistics release has no rows to link an attacker file to.",
        ),
    )
}

#: Review decisions are the actions of the same names.
DECISION_ACTIONS: dict[str, str] = {
    Review.Decision.APPROVE: "approve",
    Review.Decision.CHANGES: "request_changes",
    Review.Decision.REJECT: "reject",
}


TABLE = Table(TRANSITIONS)
sources = TABLE.sources
target = TABLE.target
_who = TABLE.who

#: A round the worker has yet to finish (queued, or running): the page polls it.
RUN_UNDER_WAY = frozenset({*sources("start_run"), *sources("finish_run")})
#: A round that ended without a release (its run failed, it was rejected or cancelled).
ENDED_UNRELEASED = TABLE.targets("fail_run", "reject", "cancel")


def run_under_way(release_request: ReleaseRequest) -> bool:
    return release_request.state in RUN_UNDER_WAY


def ended_unreleased(release_request: ReleaseRequest) -> bool:
    return release_request.state in ENDED_UNRELEASED


# --- Seeing a request ----------------------------------------------------------------------------


def can_view(user, release_request: ReleaseRequest) -> bool:
    """Officers see every request of their projects, a steward their own (while a steward of its
    project), a named recipient the approved release (also once revoked or expired, to see why
    it ended), whatever their project."""
    if user is None or not user.is_authenticated:
        return False
    if is_project_officer(user, release_request):
        return True
    if is_project_steward_requester(user, release_request):
        return True
    return release_request.state in ReleaseRequest.RELEASED_STATES and is_named_recipient(
        user, release_request
    )


def can_see_original(user, release_request: ReleaseRequest) -> bool:
    """Only officers and the requesting steward see anything computed on the original data."""
    if user is None or not user.is_authenticated:
        return False
    return is_project_officer(user, release_request) or is_project_steward_requester(
        user, release_request
    )


# --- can_ / check_ -------------------------------------------------------------------------------


def refusal(action: str, user, release_request: ReleaseRequest) -> tuple[type, str] | None:
    """(exception class, reason) that stops ``user`` doing ``action`` now, or None."""
    meta = ACTIONS[action]
    if user is not None and not can_view(user, release_request):
        return Http404, "No such release request."
    reason = _who_refuses(_who(action), user, release_request, meta)
    if reason:
        return PermissionDenied, reason
    if release_request.kind not in meta.kinds:
        return InvalidInput, meta.kind_rule
    state = release_request.state if action == "expire" else release_request.effective_state
    if (state, action) not in TRANSITIONS:
        label = ReleaseRequest.State(state).label.lower()
        return InvalidInput, f"This request is {label}; {meta.state_rule}"
    if meta.guard is not None:
        reason = meta.guard(user, release_request)
        if reason:
            return InvalidInput, reason
    return None


def can(action: str, user, release_request: ReleaseRequest) -> bool:
    return refusal(action, user, release_request) is None


def check(action: str, user, release_request: ReleaseRequest) -> Transition:
    """Raise the refusal of ``action``, or return its transition."""
    refused = refusal(action, user, release_request)
    if refused is not None:
        exception, reason = refused
        raise exception(reason)
    state = release_request.state if action == "expire" else release_request.effective_state
    return TRANSITIONS[(state, action)]


def can_start_run(user, release_request) -> bool:
    return can("start_run", user, release_request)


def check_start_run(user, release_request) -> Transition:
    return check("start_run", user, release_request)


def can_finish_run(user, release_request) -> bool:
    return can("finish_run", user, release_request)


def can_fail_run(user, release_request) -> bool:
    return can("fail_run", user, release_request)


def can_retry_run(user, release_request) -> bool:
    return can("retry_run", user, release_request)


def check_retry_run(user, release_request) -> Transition:
    return check("retry_run", user, release_request)


def can_cancel(user, release_request) -> bool:
    return can("cancel", user, release_request)


def check_cancel(user, release_request) -> Transition:
    return check("cancel", user, release_request)


def can_approve(user, release_request) -> bool:
    return can("approve", user, release_request)


def check_approve(user, release_request) -> Transition:
    return check("approve", user, release_request)


def can_request_changes(user, release_request) -> bool:
    return can("request_changes", user, release_request)


def check_request_changes(user, release_request) -> Transition:
    return check("request_changes", user, release_request)


def can_reject(user, release_request) -> bool:
    return can("reject", user, release_request)


def check_reject(user, release_request) -> Transition:
    return check("reject", user, release_request)


def can_resubmit(user, release_request) -> bool:
    return can("resubmit", user, release_request)


def check_resubmit(user, release_request) -> Transition:
    return check("resubmit", user, release_request)


def can_rerun(user, release_request) -> bool:
    return can("rerun", user, release_request)


def check_rerun(user, release_request) -> Transition:
    return check("rerun", user, release_request)


def can_revoke(user, release_request) -> bool:
    return can("revoke", user, release_request)


def check_revoke(user, release_request) -> Transition:
    return check("revoke", user, release_request)


def can_accept_terms(user, release_request) -> bool:
    return can("accept_terms", user, release_request)


def check_accept_terms(user, release_request) -> Transition:
    return check("accept_terms", user, release_request)


def can_download(user, release_request) -> bool:
    return can("download", user, release_request)


def check_download(user, release_request) -> Transition:
    return check("download", user, release_request)


def can_reproduce(user, release_request) -> bool:
    return can("reproduce", user, release_request)


def check_reproduce(user, release_request) -> Transition:
    return check("reproduce", user, release_request)


def checks_to_accept(release_request: ReleaseRequest) -> list:
    """The failing checks an approval must accept with a written justification."""
    kind = kinds.of(release_request)
    acceptable = kind.acceptable_checks()
    if not acceptable or not release_request.summary:
        return []
    return [c for c in kind.checks(release_request) if not c.passed and c.name in acceptable]


def can_attach_attacker_file(user, release_request) -> bool:
    return can("attach_attacker_file", user, release_request)


def check_attach_attacker_file(user, release_request) -> Transition:
    return check("attach_attacker_file", user, release_request)


def can_review(user, release_request) -> bool:
    """Any of the three decisions is open to ``user`` (the review form is shown)."""
    return any(can(a, user, release_request) for a in DECISION_ACTIONS.values())


# --- Buttons -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Button:
    action: str
    label: str
    enabled: bool
    reason: str = ""


#: Actions people take on a request's page (the worker's are not buttons).
PERSON_ACTIONS = (
    "cancel",
    "approve",
    "request_changes",
    "reject",
    "resubmit",
    "rerun",
    "revoke",
    "accept_terms",
    "download",
    "reproduce",
    "attach_attacker_file",
)


def buttons(user, release_request: ReleaseRequest) -> dict[str, Button]:
    """The page's buttons for ``user``: each action they may take in this kind of state, enabled
    or disabled with the reason. Actions for other people, or for other states, have none."""
    out: dict[str, Button] = {}
    state = release_request.effective_state
    for name in PERSON_ACTIONS:
        meta = ACTIONS[name]
        if state not in meta.shown_in or release_request.kind not in meta.kinds:
            continue
        refused = refusal(name, user, release_request)
        if refused is not None and refused[0] is not InvalidInput:
            continue  # not theirs to do: no button at all
        label = TABLE.label(name)
        out[name] = Button(name, label, refused is None, refused[1] if refused else "")
    return out


# --- A reproduction's states ---------------------------------------------------------------------

RState = Reproduction.State

#: A re-run of a round, by the worker (the sweeper's ``retry`` when its worker died).
REPRODUCTION = Table(
    {
        (RState.QUEUED, "start"): Transition(RState.RUNNING, SYSTEM, "Start the re-run"),
        (RState.RUNNING, "find_identical"): Transition(RState.IDENTICAL, SYSTEM, "Identical"),
        (RState.RUNNING, "find_different"): Transition(RState.DIFFERENT, SYSTEM, "Different"),
        (RState.RUNNING, "fail"): Transition(RState.FAILED, SYSTEM, "Fail the re-run"),
        (RState.RUNNING, "retry"): Transition(RState.QUEUED, SYSTEM, "Retry the re-run"),
    }
)
#: A reproduction not yet final: no second one of the round is asked for meanwhile.
REPRODUCTION_UNDER_WAY = frozenset({*REPRODUCTION.sources("start"), *REPRODUCTION.sources("fail")})


# --- An attacker file's linkage ------------------------------------------------------------------

LState = AttackerFile.State

#: The linkage of an attacker file to its request's extract, by the worker. A file waits until
#: its round has an extract; each new extract (a finished run) queues it again.
LINKAGE = Table(
    {
        **{
            (state, "queue"): Transition(LState.QUEUED, SYSTEM, "Queue the linkage")
            for state in LState.values
        },
        (LState.QUEUED, "start"): Transition(LState.RUNNING, SYSTEM, "Start the linkage"),
        (LState.RUNNING, "finish"): Transition(LState.DONE, SYSTEM, "Linked"),
        (LState.RUNNING, "fail"): Transition(LState.FAILED, SYSTEM, "Fail the linkage"),
        (LState.RUNNING, "retry"): Transition(LState.QUEUED, SYSTEM, "Retry the linkage"),
    }
)
#: A linkage not yet final: its card polls.
LINKAGE_UNDER_WAY = frozenset({*LINKAGE.sources("start"), *LINKAGE.sources("finish")})
