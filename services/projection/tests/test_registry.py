from __future__ import annotations

import pytest

from services.projection.errors import InvalidUnitKey, UnitKeyConflict
from services.projection.registry import UnitInfo, UnitRegistry

from .units import MessageCounter, TitleUnit, UserMessageCounter


def test_units_are_listed_in_registration_order() -> None:
    registry = UnitRegistry((TitleUnit(), MessageCounter()))

    assert registry.describe() == [UnitInfo("title", 1), UnitInfo("messages", 1)]


def test_registering_the_same_unit_twice_is_idempotent() -> None:
    counter = MessageCounter()
    registry = UnitRegistry((counter,))

    registry.register(counter)
    registry.register(MessageCounter())  # the same unit, built again by other wiring

    assert len(registry) == 1
    assert registry.get("messages") is counter


def test_a_key_taken_with_another_state_version_is_refused() -> None:
    counter = MessageCounter()
    registry = UnitRegistry((counter,))

    with pytest.raises(UnitKeyConflict) as raised:
        registry.register(UserMessageCounter())

    assert raised.value.reason == "UNIT_KEY_CONFLICT"
    assert raised.value.metadata == {
        "key": "messages",
        "registered_version": "1",
        "offered_version": "2",
    }
    assert registry.get("messages") is counter


def test_another_unit_under_a_taken_key_is_refused_even_at_the_same_version() -> None:
    impostor = TitleUnit()
    impostor.key = "messages"
    registry = UnitRegistry((MessageCounter(),))

    with pytest.raises(UnitKeyConflict):
        registry.register(impostor)


@pytest.mark.parametrize("key", ["", "k" * 65])
def test_keys_must_fit_the_contract(key: str) -> None:
    unit = MessageCounter()
    unit.key = key

    with pytest.raises(InvalidUnitKey):
        UnitRegistry((unit,))
