from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from app.auth.security import guessable
from app.models import Role
from app.validation import ScalarsAsWritten, named_by_rule

USERNAME_PATTERN = r"^[A-Za-z0-9_.\-]{2,64}$"


def _not_blank(password: str) -> str:
    if not password.strip():
        raise ValueError("a password cannot be only spaces")
    return password


def _hard_to_guess(password: str) -> str:
    why = guessable(password)
    if why is not None:
        raise ValueError(why)
    return password


USERNAME_RULE = "2-64 letters (A-Z, without accents), digits, _ . -"
Username = named_by_rule(USERNAME_PATTERN, USERNAME_RULE, 64)
# A name of a batch: judged by app.users.service.create_users with the names listed twice and
# those taken, so that one answer names every name to fix (judged here, a malformed name hid the
# others' problems until it was fixed). The schema still shows the rule.
BatchUsername = Annotated[str, Field(description=USERNAME_RULE, json_schema_extra={"pattern": USERNAME_PATTERN})]
# UserCreate judges its password against its username too, once, rather than twice.
PasswordText = Annotated[str, Field(min_length=8, max_length=1024), AfterValidator(_not_blank)]
Password = Annotated[PasswordText, AfterValidator(_hard_to_guess)]
YourPassword = Annotated[str | None, Field(
    default=None, max_length=1024,
    description="your own password, the admin making the change: asked for when it creates or makes an admin, "
                "or changes another admin's role, active flag or password",
)]


class UserCreate(ScalarsAsWritten):
    # `"is_admin": true` was dropped with a 201: a field it does not know is refused by name.
    model_config = ConfigDict(extra="forbid")

    username: Username
    role: Role
    password: PasswordText
    must_change_password: bool = Field(
        default=False, description="true: the password is only for their first login; until they choose their own, "
                                   "they may do nothing else (the browser leads them to Your account)")
    your_password: YourPassword

    @field_validator("password")
    @classmethod
    def _not_the_name(cls, password: str, info: ValidationInfo) -> str:
        # The username, checked with the field before this one, is the first guess of all; a
        # username refused leaves the password judged alone.
        username = info.data.get("username")
        why = guessable(password, user_inputs=(username,) if username else ())
        if why is not None:
            raise ValueError(why)
        return password


# Each new account's password is hashed on purpose slowly (about a fifth of a second): a hundred
# take some twenty seconds, which one request may.
MAX_NEW_USERS = 100


class UsersCreate(ScalarsAsWritten):
    """Several accounts of one role at once, each given a generated password."""

    model_config = ConfigDict(extra="forbid")

    usernames: list[BatchUsername] = Field(min_length=1, max_length=MAX_NEW_USERS)
    role: Role
    must_change_password: bool = Field(
        default=True, description="the generated passwords are for the first login only (see UserCreate)")

    @field_validator("role")
    @classmethod
    def _not_admin(cls, role: Role) -> Role:
        # Making an admin asks for the acting admin's own password, one at a time.
        if role == Role.admin:
            raise ValueError("admins are created one at a time (New user), with your own password")
        return role


class UserUpdate(ScalarsAsWritten):
    # A field this cannot change (username, say) is refused by name, not dropped with a 200.
    model_config = ConfigDict(extra="forbid")

    role: Role | None = None
    is_active: bool | None = None
    password: Password | None = None
    must_change_password: bool | None = Field(
        default=None, description="true: they must choose their own password before doing anything else (with a new "
                                  "`password`, or to make them replace the one they have); false: they need not")
    your_password: YourPassword

    @model_validator(mode="after")
    def _changes_something(self) -> UserUpdate:
        # `{}` answered 200 with nothing done, where the users page says so.
        if self.role is None and self.is_active is None and self.password is None and self.must_change_password is None:
            raise ValueError("nothing to change: no new role, active flag, password or must_change_password was given")
        return self


class PasswordChange(BaseModel):
    """A user's own new password, with the current one: a browser left logged in is not enough
    to take the account over."""

    model_config = ConfigDict(extra="forbid")

    current_password: str = Field(min_length=1, max_length=1024)
    new_password: Password

    @model_validator(mode="after")
    def _differs(self) -> PasswordChange:
        if self.new_password == self.current_password:
            raise ValueError("the new password is the current one: choose another")
        return self


class UserRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    username: str
    role: Role
    labeler_uuid: str
    is_active: bool
    must_change_password: bool = Field(description="an admin chose their password: they must choose their own "
                                                   "before doing anything else")
    created_at: datetime
    locked_until: datetime | None = Field(
        default=None, description="while failed logins against this name lock it: when the lock ends")


class UnlockRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    your_password: YourPassword


class UnlockRead(BaseModel):
    cleared: bool = Field(description="whether there were failed logins or a lock to forget")


class NewUserRead(UserRead):
    password: str = Field(description="generated; shown in this answer only, stored as its hash")
