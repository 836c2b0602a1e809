"""Character cards: who she is (persona, speaking style, world view) and how she starts.

A card is content, validated at load: ``characters/<id>/card.toml``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

CARDS_DIR = Path(__file__).resolve().parent
"""Where the cards live (resolved: an editable install names the source folder, not its link)."""


class CardError(Exception):
    """A card is missing or invalid; the message names the file, the field and the fix."""


class StartingState(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    location: str = "home"
    stamina: float = Field(80, ge=0, le=100)
    satiety: float = Field(70, ge=0, le=100)
    mood: float = Field(60, ge=0, le=100)
    money: int = Field(300, ge=0)
    inventory: dict[str, int] = Field(default_factory=dict)


class CharacterCard(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """The folder name; a copy loaded as ``yuiju@17`` carries that id instead (`load_card`)."""
    name: str
    """Her name as users and the model read it, e.g. 悠酱."""
    nicknames: list[str] = Field(default_factory=list)
    persona: str
    """Identity and personality, in Chinese, second person is fine."""
    speaking_style: str = ""
    """How she talks in chat, in Chinese."""
    likes: list[str] = Field(default_factory=list)
    """Things she enjoys; the decision prompt and chat use them."""
    limits: list[str] = Field(default_factory=list)
    """Hard lines for the model, e.g. 不编造家人; each is one Chinese sentence."""
    secrets: list[str] = Field(default_factory=list)
    """What she knows and never says, however short (a pass code, a private fact): each is shown
    to the model as a line marked secret, and an answer quoting one is withheld."""
    world_view: str = ""
    """Her world and where it ends: users live in reality and cannot enter it."""
    start: StartingState = Field(default_factory=StartingState)
    relations: dict[str, float] = Field(default_factory=dict)
    """How close she starts to other characters of her town, 0–100, by id
    (``kaede = 55``): where her closeness to them rests (others start and rest at 10)."""

    @field_validator("relations")
    @classmethod
    def _closeness_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        for other, closeness in value.items():
            if not 0 <= closeness <= 100:
                raise ValueError(f"closeness to {other!r} must be 0–100, got {closeness!r}")
        return value

    @field_validator("secrets")
    @classmethod
    def _secrets_are_quotable(cls, secrets: list[str]) -> list[str]:
        for secret in secrets:
            if sum(c.isalnum() for c in secret) < 2:
                raise ValueError(
                    f"secret {secret!r} has fewer than 2 letters or digits: no answer could be "
                    "checked for it without withholding ordinary words; write the whole secret"
                )
        return secrets


def card_of(character_id: str) -> str:
    """The card a character is: ``yuiju`` for ``yuiju`` and for its copies ``yuiju@2``, ``yuiju@17``."""
    return character_id.partition("@")[0]


def load_card(character_id: str, folder: Path = CARDS_DIR) -> CharacterCard:
    """The card of ``character_id``. A copy (``yuiju@17``) gets her card's persona, name and start
    with its own id, so everything keyed by the id (state, leases, episodes, memory, chat
    sessions) is the copy's own."""
    card = _read_card(card_of(character_id), folder)
    return copy_of(card, character_id)


def copy_of(card: CharacterCard, character_id: str) -> CharacterCard:
    """``card`` as the character ``character_id`` (itself or one of its copies)."""
    return (
        card if card.id == character_id else card.model_copy(update={"id": character_id}, deep=True)
    )


def _read_card(character_id: str, folder: Path) -> CharacterCard:
    path = folder / character_id / "card.toml"
    if not path.exists():
        raise CardError(
            f"no card for character {character_id!r}: expected {path}. Create it (copy "
            f"characters/yuiju/card.toml) or remove {character_id!r} from [world].characters"
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        card = CharacterCard.model_validate(data)
    except tomllib.TOMLDecodeError as exc:
        raise CardError(f"{path}: not valid TOML: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))} = {e.get('input')!r}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise CardError(f"{path}: invalid card: {problems}. Fix these fields.") from None
    if card.id != character_id:
        raise CardError(
            f"{path}: id is {card.id!r} but the folder is {character_id!r}; make them equal"
        )
    return card
