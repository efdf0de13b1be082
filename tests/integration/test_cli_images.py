"""Images in `agenthost chat`, driven in a real terminal (a pty, through
pexpect) against `agenthost up` in its own process, whose default model
takes images and is served by the fake provider: `@path` of an image file
and a dropped path (a line that is just the path, its spaces escaped as a
terminal types them) each send the image, which the chat names with its
size, and which reaches the provider as an image part; a file that is no
image, and a model that takes none, are refused in one line."""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_cli import chat, running_up
from tests.support.images import (
    NOT_AN_IMAGE,
    image_parts,
    png,
    provider_thread,
    write_models_file,
)


def test_an_at_path_and_a_dropped_path_send_their_images(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    pictures = tmp_path / "my pictures"
    pictures.mkdir()
    shot, dropped = png(rgb=(90, 10, 10)), png(rgb=(10, 90, 10))
    (pictures / "shot.png").write_bytes(shot)
    (pictures / "the bug.png").write_bytes(dropped)
    (pictures / "report.png").write_bytes(NOT_AN_IMAGE)
    with provider_thread() as provider:
        models = write_models_file(tmp_path, provider.url)
        with running_up(tmp_path, None, env={"AGENTHOST_MODELS_FILE": str(models)}) as up:
            child = chat(up, "--workspace", str(project))
            try:
                child.expect_exact(">")
                child.sendline(f'what is wrong in @"{pictures / "shot.png"}"?')
                child.expect_exact(f"[image: shot.png, {len(shot)} B]")
                child.expect_exact("I see it.")
                assert image_parts(provider.requests[-1].body) == [shot]
                last = provider.requests[-1].body["messages"][-1]["content"]
                assert last[0]["text"] == "what is wrong in [image: shot.png]?"

                # Dropped on the terminal: the path, its spaces escaped.
                child.expect_exact(">")
                child.sendline(str(pictures / "the bug.png").replace(" ", "\\ "))
                child.expect_exact(f"[image: the bug.png, {len(dropped)} B]")
                child.expect_exact("I see it.")
                assert image_parts(provider.requests[-1].body) == [shot, dropped]

                # A file named like an image that is none is refused, unsent.
                child.expect_exact(">")
                asked = len(provider.requests)
                child.sendline(f"'{pictures / 'report.png'}'")
                child.expect_exact(
                    "error: cannot send image report.png: its bytes are not a PNG, JPEG, "
                    "GIF or WebP image"
                )
                child.expect_exact(">")
                child.sendline("/model plain")
                child.expect_exact("plain")
                child.expect_exact(">")
                child.sendline(f'and @"{pictures / "shot.png"}"')
                child.expect_exact("takes no images")
                assert len(provider.requests) == asked
            finally:
                child.sendline("/quit")
                child.close()
