"""The masked description keeps the whole head noun phrase (issue 37 item 5): a part of the
head's members that opens a relative clause ("three of whose members") ends the head."""

from __future__ import annotations

import pytest

from cuqa_builder.verification.masking import masked_description


@pytest.mark.parametrize(("description", "masked"), [
    # the four seen clipped
    ("the music group three of whose members were among the seven people killed in a plane "
     "crash in July 2024", "a certain music group"),
    ("the naval fleet one of whose ships was struck by a missile in January 2024",
     "a certain naval fleet"),
    ("the group of countries one of whose members left it in January 2025",
     "a certain group of countries"),
    ("the region several areas of which were declared disaster zones in May 2024",
     "a certain region"),
    # more shapes: digits, other quantifiers, "of its" / "of their", a hyphenated number
    ("the party most of whose deputies resigned in March 2025", "a certain party"),
    ("the club two of its players were arrested in June 2024", "a certain club"),
    ("the band 3 of whose albums were withdrawn in May 2024", "a certain band"),
    ("the island chain each of whose islands lost power in October 2024",
     "a certain island chain"),
    ("the province half of which was flooded in September 2024", "a certain province"),
    ("the Nigerian state part of whose capital was flooded in September 2024",
     "a certain Nigerian state"),
    ("the orchestra twenty-one members of which defected in April 2024", "a certain orchestra"),
    ("the couple both of whom were sentenced in July 2024", "a certain couple"),
    ("the town some of whose residents were evacuated in August 2023", "a certain town"),
])
def test_a_part_that_opens_a_relative_clause_ends_the_head(description: str, masked: str) -> None:
    assert masked_description(description) == masked


@pytest.mark.parametrize(("description", "masked"), [
    # a number in a name is the name's ("the Big Three", "the Group of Seven")
    ("the Group of Seven one of whose members hosted a summit in June 2024",
     "a certain Group of Seven"),
    ("the Big Three carmaker one of whose plants closed in May 2024",
     "a certain Big Three carmaker"),
    # a number that is no part of a relative clause is left where it is
    ("the one-day cricket series won by India in June 2024", "a certain one-day cricket series"),
])
def test_a_number_that_opens_no_relative_clause_stays_in_the_head(
    description: str, masked: str
) -> None:
    assert masked_description(description) == masked
