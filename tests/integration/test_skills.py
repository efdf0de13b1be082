"""Skills written for Claude Code work unchanged: a folder holding SKILL.md
(YAML front matter `name` and `description`, then the instructions) and the
files beside it. The real runtime over the local OpenAI-compatible
provider, real files in a real git repository and a user config folder."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.capabilities.skills import BUDGET_BYTES
from services.agentruntime.models.tests.fake_provider import FakeProvider
from tests.support.provider_turns import (
    adapter,
    call_reply,
    logged,
    sent,
    text_reply,
    tool_names,
    turn,
)
from tests.support.stack import Stack, running_stack

SID = "skilled"
# As a Claude Code user writes one: .claude/skills/<name>/SKILL.md and a helper beside it.
PDF_SKILL = """---
name: pdf-forms
description: Fill in PDF forms with the project's own helper. Use when the user asks to
  fill a PDF form.
---

# Filling PDF forms

1. List the form's fields: `python .claude/skills/pdf-forms/fill.py --fields form.pdf`.
2. Fill them from a JSON file (see fill.py for its shape).
"""
FILL_PY = "import sys\n\nFIELDS_MARKER = 'the pdf helper'\n"
CHANGELOG_SKILL = """---
name: changelog
description: |
  Write a CHANGELOG entry in the team's style.
---
Use template.md; keep each entry to one line.
"""
TEMPLATE = "## [version] - date\n- the team's changelog template\n"
BROKEN_SKILL = """---
name: broken
description: [unclosed
---
Never seen.
"""
SECRET = "the user's token, never for the model"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's config folder: a skill of their own, and a secret beside it."""
    folder = tmp_path / "config"
    (folder / "skills" / "changelog").mkdir(parents=True)
    (folder / "skills" / "changelog" / "SKILL.md").write_text(CHANGELOG_SKILL)
    (folder / "skills" / "changelog" / "template.md").write_text(TEMPLATE)
    (folder / "settings.toml").write_text(f'token = "{SECRET}"\n')
    monkeypatch.setenv("AGENTHOST_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    skill = root / ".claude" / "skills" / "pdf-forms"
    skill.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (skill / "SKILL.md").write_text(PDF_SKILL)
    (skill / "fill.py").write_text(FILL_PY)
    return root


@pytest.fixture
async def stack(
    tmp_path: Path, provider: FakeProvider, repo: Path, config: Path
) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path / "data", model=adapter(provider)) as running:
        await running.log.create_session(SID, str(repo))
        yield running


async def skills_command(stack: Stack) -> str:
    reply = await stack.runtime.ExecuteCommand(
        rt.ExecuteCommandRequest(session_id=SID, name="skills")
    )
    assert reply.ok, reply.message
    return str(reply.message)


async def test_a_claude_code_skill_is_listed_loaded_and_its_files_read(
    stack: Stack, provider: FakeProvider, repo: Path, config: Path
) -> None:
    template = config / "skills" / "changelog" / "template.md"
    provider.enqueue(
        call_reply("skill", {"name": "pdf-forms"}, "c1"),
        call_reply("read_file", {"path": ".claude/skills/pdf-forms/fill.py"}, "c2"),
        call_reply("skill", {"name": "changelog"}, "c3"),
        call_reply("read_file", {"path": str(template)}, "c4"),
        text_reply("Done."),
    )
    await turn(stack, SID, "fill in form.pdf, then note it in the changelog")

    first = sent(provider, 0)
    # The catalog, before the prompt: names and descriptions, never a body.
    assert 'name="pdf-forms">Fill in PDF forms with the project' in first
    assert 'name="changelog">Write a CHANGELOG entry' in first
    assert first.index("pdf-forms") < first.index("fill in form.pdf")
    assert "List the form's fields" not in first
    assert "skill" in tool_names(provider, 0)

    loaded = sent(provider, 1)
    assert "1. List the form's fields" in loaded and "name: pdf-forms" not in loaded
    assert ".claude/skills/pdf-forms/fill.py" in loaded
    assert "the pdf helper" in sent(provider, 2)
    # The user's own skill, outside the session's folder: listed by its
    # absolute path, which read_file then reads.
    assert "keep each entry to one line" in sent(provider, 3)
    assert str(template) in sent(provider, 3)
    assert "the team's changelog template" in sent(provider, 4)

    # Logged as the calls and their results; the catalog once.
    events = await logged(stack, SID)
    added = [e.context_added for e in events if e.HasField("context_added")]
    skills = [a for a in added if a.capability == "skills"]
    assert len(skills) == 1
    assert sorted(s.path for s in skills[0].sources) == sorted(
        [".claude/skills/pdf-forms/SKILL.md", str(config / "skills" / "changelog" / "SKILL.md")]
    )
    results = [e.tool_result for e in events if e.HasField("tool_result")]
    assert [r.ok for r in results] == [True, True, True, True], results

    listed = await skills_command(stack)
    assert "pdf-forms" in listed and ".claude/skills/pdf-forms/SKILL.md" in listed
    assert "changelog" in listed and "global" in listed


async def test_the_config_folder_is_read_only_and_only_its_skills_are_readable(
    stack: Stack, provider: FakeProvider, config: Path
) -> None:
    skill = config / "skills" / "changelog"
    provider.enqueue(
        call_reply("read_file", {"path": str(config / "settings.toml")}, "c1"),
        call_reply("write_file", {"path": str(skill / "template.md"), "content": "x"}, "c2"),
        call_reply(
            "edit_file",
            {"path": str(skill / "template.md"), "old_string": "date", "new_string": "x"},
            "c3",
        ),
        call_reply("skill", {"name": "nonesuch"}, "c4"),
        text_reply("ok"),
    )
    await stack.runtime.UpdateSettings(
        rt.UpdateSettingsRequest(session_id=SID, approvals=ev.APPROVAL_POLICY_NEVER)
    )
    await turn(stack, SID, "look around")
    events = await logged(stack, SID)
    results = [e.tool_result for e in events if e.HasField("tool_result")]
    assert [r.ok for r in results] == [False, False, False, False]
    assert "outside the session folder" in results[0].error
    assert "may be read, never written" in results[1].error
    assert "may be read, never written" in results[2].error
    assert "no skill is named 'nonesuch'; the skills are: pdf-forms, changelog" in results[3].error
    assert (skill / "template.md").read_text() == TEMPLATE
    assert all(SECRET not in sent(provider, n) for n in range(len(provider.requests)))


async def test_a_broken_skill_is_a_problem_never_a_crash(
    stack: Stack, provider: FakeProvider, repo: Path, config: Path
) -> None:
    skills = repo / ".claude" / "skills"
    (skills / "broken").mkdir()
    (skills / "broken" / "SKILL.md").write_text(BROKEN_SKILL)
    (skills / "nameless").mkdir()
    (skills / "nameless" / "SKILL.md").write_text("---\ndescription: no name\n---\nbody\n")
    # The same name in the user's folder: the project's comes first.
    (config / "skills" / "pdf").mkdir()
    (config / "skills" / "pdf" / "SKILL.md").write_text(
        "---\nname: pdf-forms\ndescription: the user's older copy\n---\nold\n"
    )
    provider.enqueue(call_reply("skill", {"name": "broken"}, "c1"), text_reply("ok"))
    await turn(stack, SID, "hello")

    first = sent(provider, 0)
    assert "pdf-forms" in first and "changelog" in first
    assert 'name="broken"' not in first and "no name" not in first
    assert "older copy" not in first
    assert "cannot be loaded" in sent(provider) and "not valid YAML" in sent(provider)

    listed = await skills_command(stack)
    assert ".claude/skills/broken/SKILL.md: the front matter is not valid YAML" in listed
    assert "(line 4 of the file)" in listed
    assert ".claude/skills/nameless/SKILL.md: the front matter has no `name`" in listed
    assert "the name 'pdf-forms' is taken by .claude/skills/pdf-forms/SKILL.md" in listed


async def test_a_changed_catalog_is_sent_again_and_survives_compaction_and_restart(
    stack: Stack, provider: FakeProvider, repo: Path
) -> None:
    provider.enqueue(text_reply("Noted."))
    await turn(stack, SID, "hello")
    # An edit of a skill's body changes nothing the model was sent.
    skill_md = repo / ".claude" / "skills" / "pdf-forms" / "SKILL.md"
    skill_md.write_text(PDF_SKILL + "\n3. Check the filled form.\n")
    provider.enqueue(text_reply("ok"))
    await turn(stack, SID, "go on")
    assert sent(provider).count('name="pdf-forms">') == 1

    added = repo / ".agenthost" / "skills" / "release"
    added.mkdir(parents=True)
    (added / "SKILL.md").write_text("---\nname: release\ndescription: Cut a release.\n---\nTag it.")
    provider.enqueue(text_reply("ok"))
    await turn(stack, SID, "and now?")
    changed = sent(provider)
    assert "this list replaces the one before" in changed
    assert changed.count('name="release">Cut a release.') == 1

    provider.enqueue(text_reply("We said hello."))
    compacted = await stack.runtime.ExecuteCommand(
        rt.ExecuteCommandRequest(session_id=SID, name="compact")
    )
    assert compacted.ok
    provider.enqueue(text_reply("still here"))
    await turn(stack, SID, "after the compaction")
    after = sent(provider)
    assert after.count('name="release">') == 1 and after.count('name="pdf-forms">') == 1

    for name in stack.embedded.names:
        if name == "agentruntime":  # a stopped runtime closed its model's client
            stack.embedded.model = adapter(provider)
        await stack.restart(name)
    provider.enqueue(text_reply("and after the restart"))
    await turn(stack, SID, "after the restart")
    restarted = sent(provider)
    assert restarted.count('name="release">') == 1 and restarted.count('name="pdf-forms">') == 1
    events = await logged(stack, SID)
    assert sum(e.context_added.capability == "skills" for e in events) == 2

    for folder in (added, repo / ".claude" / "skills" / "pdf-forms"):
        for file in folder.iterdir():
            file.unlink()
        folder.rmdir()
    provider.enqueue(text_reply("ok"))
    await turn(stack, SID, "and without them?")
    assert "No skills are available any more" not in sent(provider)  # the user's is left
    assert 'name="changelog">' in sent(provider)


async def test_a_catalog_over_the_budget_names_the_rest(
    stack: Stack, provider: FakeProvider, repo: Path
) -> None:
    for n in range(40):
        folder = repo / ".agenthost" / "skills" / f"skill-{n:02}"
        folder.mkdir(parents=True)
        description = f"Skill number {n}. " + "word " * 150
        front = f"name: skill-{n:02}\ndescription: {description}"
        (folder / "SKILL.md").write_text(f"---\n{front}\n---\nx")
    provider.enqueue(text_reply("ok"))
    await turn(stack, SID, "hello")
    text = sent(provider)
    assert "over the 16384-byte budget (load them by name): " in text
    assert "skill-39" in text and 'name="skill-39"' not in text
    assert 'name="skill-00"' in text
    assert len(text.encode()) < BUDGET_BYTES + 4096


async def test_hundreds_of_skills_are_described_as_far_as_a_context_may_name(
    stack: Stack, provider: FakeProvider, repo: Path
) -> None:
    for n in range(320):
        folder = repo / ".agenthost" / "skills" / f"s{n:03}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: s{n:03}\ndescription: Do {n}.\n---\nx")
    provider.enqueue(text_reply("ok"))
    await turn(stack, SID, "hello")
    text = sent(provider)
    assert 'name="s255">Do 255.' in text and 'name="s256"' not in text
    assert "(load them by name): s256, s257," in text and "and 16 more (/skills lists them)" in text
    events = await logged(stack, SID)
    assert events[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED
