"""`render_markdown`: the Markdown subset the task page uses for plans, safe for any input."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agent_team.dashboard.safe_markdown import render_markdown

# Exactly the tags the renderer may emit, never with attributes.
_OWN_TAGS = re.compile(r"</?(?:h[1-6]|p|ul|ol|li|pre|code|strong|em|br)>")


def test_headings_lists_paragraphs_and_inline_marks() -> None:
    html = render_markdown(
        "# Plan\n\nDo **this** with `x < y`.\n\n## Steps\n\n1. one\n2. two\n   more\n\n"
        "## Risks\n\n- a\n* b\n"
    )
    assert html == (
        "<h3>Plan</h3>\n<p>Do <strong>this</strong> with <code>x &lt; y</code>.</p>\n"
        "<h4>Steps</h4>\n<ol>\n<li>one</li>\n<li>two more</li>\n</ol>\n"
        "<h4>Risks</h4>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>"
    )


def test_fenced_code_is_kept_verbatim_and_escaped() -> None:
    html = render_markdown("```\n<b>**not bold**</b>\n  indented\n```")
    assert html == "<pre><code>&lt;b&gt;**not bold**&lt;/b&gt;\n  indented</code></pre>"


def test_an_unclosed_fence_still_shows_its_text() -> None:
    assert render_markdown("```\nrm -rf /") == "<pre><code>rm -rf /</code></pre>"


def test_html_and_links_in_the_input_stay_text() -> None:
    html = render_markdown(
        '<script>alert(1)</script> <img src=x onerror="alert(2)"> [x](javascript:alert(3))'
    )
    assert "<script" not in html and "<img" not in html and "<a" not in html
    assert "&lt;script&gt;" in html and "&#34;alert(2)&#34;" in html


def test_bold_markers_inside_code_stay_literal() -> None:
    assert render_markdown("`**a**`") == "<p><code>**a**</code></p>"


def test_italic_needs_a_star_each_side_not_touching_a_word() -> None:
    assert render_markdown("say *hello* now") == "<p>say <em>hello</em> now</p>"
    assert render_markdown("**a *b* c**") == "<p><strong>a <em>b</em> c</strong></p>"
    # Arithmetic, a lone star and a bullet's star are not emphasis.
    assert render_markdown("2*3*4 and a * b * c") == "<p>2*3*4 and a * b * c</p>"
    assert render_markdown("* one *two*") == "<ul>\n<li>one <em>two</em></li>\n</ul>"
    assert render_markdown("`*x*`") == "<p><code>*x*</code></p>"


@given(st.text(alphabet=st.sampled_from(list("<>&\"'`*#-+1. \n/=abcxyz")), max_size=200))
def test_any_input_yields_only_the_renderers_own_tags(text: str) -> None:
    html = str(render_markdown(text))
    assert "<" not in _OWN_TAGS.sub("", html)
    assert '"' not in _OWN_TAGS.sub("", html)  # no attribute can be smuggled in


@given(st.text(max_size=300))
def test_arbitrary_unicode_never_leaks_a_raw_angle_bracket(text: str) -> None:
    assert "<" not in _OWN_TAGS.sub("", str(render_markdown(text)))


def test_a_line_that_never_closes_its_stars_is_drawn_as_text_past_the_cap() -> None:
    """The spans are bounded (a marked span is at most 300 characters), so such a line
    cannot stall the daemon; a line past the markup cap is plain escaped text."""
    long_line = "*a " * 2000 + "<b>"
    html = str(render_markdown(long_line))
    assert "<em>" not in html and "&lt;b&gt;" in html
    assert str(render_markdown("x *" + "y" * 299 + "* z")).count("<em>") == 1
    assert str(render_markdown("x *" + "y" * 301 + "* z")).count("<em>") == 0
