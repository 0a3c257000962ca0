"""How the epoll load engine decides that a response is whole (no network needed)."""

from __future__ import annotations

import pytest

from cnibench.tools.epoll_load import _backend, _complete

HEAD = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nX-Backend: v2\r\n"


def test_a_content_length_response_is_whole_only_with_all_its_body() -> None:
    response = HEAD + b"Content-Length: 3\r\n\r\nv2\n"
    assert _complete(response[:-1]) is None
    status, headers, body, used = _complete(response + b"HTTP/1.1 next") or (0, {}, b"", 0)
    assert (status, body, used) == (200, b"v2\n", len(response))
    assert headers[b"x-backend"] == b"v2"


def test_chunks_are_joined_and_the_end_found() -> None:
    response = HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\nv2\r\n1\r\n\n\r\n0\r\n\r\n"
    for cut in (len(HEAD) + 10, len(response) - 1):
        assert _complete(response[:cut]) is None
    done = _complete(response)
    assert done is not None
    assert (done[0], done[2], done[3]) == (200, b"v2\n", len(response))


@pytest.mark.parametrize("status", [204, 304])
def test_bodyless_statuses_end_at_the_head(status: int) -> None:
    response = f"HTTP/1.1 {status} X\r\nDate: now\r\n\r\n".encode()
    done = _complete(response)
    assert done is not None
    assert (done[0], done[3]) == (status, len(response))


def test_the_backend_is_the_header_else_a_short_one_line_body() -> None:
    assert _backend({b"x-backend": b"v1"}, b"other\n", b"x-backend") == "v1"
    assert _backend({}, b"v3\n", b"x-backend") == "v3"
    assert _backend({}, b"two\nlines\n", b"x-backend") == ""
    assert _backend({}, b"x" * 65, b"x-backend") == ""
