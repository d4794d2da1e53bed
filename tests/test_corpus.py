"""The sketch corpus and the prompts: determinism, variety, static validity, real rendering."""

from __future__ import annotations

import random
import re
import statistics

import pytest
import tree_sitter as ts
import tree_sitter_javascript as tsj

from brushrl.config import DEFAULT_WHITELIST, GateConfig, PromptsConfig, RenderConfig
from brushrl.corpus import BASES, CorpusItem, as_reply, build_corpus, make_variant
from brushrl.prompts import (
    SYSTEM_PROMPT,
    build_system_prompt,
    chat_messages,
    resolve_system_prompt,
    sample_prompts,
    user_prompt,
)

VARIATIONS = 12  # the SFT default (brushrl.config.SFTConfig.variations)
_PARSER = ts.Parser(ts.Language(tsj.language()))

#: The only non-brush calls a corpus sketch makes: the skeleton's, plus cos/sin inside loops.
SKELETON_CALLS = {"createCanvas", "angleMode", "noLoop", "translate", "background", "cos", "sin"}


@pytest.fixture(scope="module")
def corpus() -> list[CorpusItem]:
    return build_corpus(VARIATIONS, seed=0)


def _text(node: ts.Node) -> str:
    return node.text.decode()


def _calls(code: str) -> tuple[ts.Tree, list[ts.Node]]:
    """The parse tree and every call expression in source order."""
    tree = _PARSER.parse(code.encode())
    out, stack = [], [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "call_expression":
            out.append(node)
        stack.extend(reversed(node.children))
    return tree, sorted(out, key=lambda n: n.start_byte)


def _brush_method(call: ts.Node) -> str | None:
    fn = call.child_by_field_name("function")
    if fn.type == "member_expression" and _text(fn.child_by_field_name("object")) == "brush":
        return _text(fn.child_by_field_name("property"))
    return None


def _in_loop(node: ts.Node) -> bool:
    while node is not None:
        if node.type == "for_statement":
            return True
        node = node.parent
    return False


def static_problems(code: str) -> list[str]:
    """Our own tree-sitter check of one sketch; an empty list means it is valid.

    Checks: no syntax error; every ``brush.X`` call has X in the default whitelist; the only bare
    calls are the skeleton's (so no bare p5 drawing function, text or image); exactly one
    ``createCanvas(600, 600, WEBGL)``; every mark is fill -> beginShape -> >= 3 vertex ->
    endShape(true) (a vertex inside a ``for`` loop counts as a run of vertices), or fill -> circle.
    """
    tree, calls = _calls(code)
    problems = []
    if tree.root_node.has_error:
        problems.append("syntax error")
    canvases = []
    state, vertices, filled = "idle", 0, False
    for call in calls:
        args = _text(call.child_by_field_name("arguments"))
        method = _brush_method(call)
        if method is None:
            name = _text(call.child_by_field_name("function"))
            if name not in SKELETON_CALLS:
                problems.append(f"bare call {name}")
            if name == "createCanvas":
                canvases.append(args)
            continue
        if method not in DEFAULT_WHITELIST:
            problems.append(f"brush.{method} is not whitelisted")
        if method == "fill":
            filled = True
        elif method == "beginShape":
            if state != "idle" or not filled:
                problems.append("beginShape without a fill before it")
            state, vertices, filled = "shape", 0, False
        elif method == "vertex":
            if state != "shape":
                problems.append("vertex outside a shape")
            vertices += 3 if _in_loop(call) else 1
        elif method == "endShape":
            if state != "shape" or vertices < 3 or args != "(true)":
                problems.append(f"bad endShape{args} after {vertices} vertices")
            state = "idle"
        elif method == "circle":
            if not filled:
                problems.append("circle without a fill before it")
            filled = False
    if state != "idle":
        problems.append("unclosed shape")
    if canvases != ["(600, 600, WEBGL)"]:
        problems.append(f"createCanvas calls: {canvases}")
    return problems


def test_static_checker_catches_bad_sketches():
    good = make_variant("tulip", 0).code
    assert static_problems(good) == []
    assert "bare call ellipse" in static_problems(good.replace("brush.noStroke();", "ellipse(1, 2, 3);"))
    assert "brush.set is not whitelisted" in static_problems(good.replace("brush.noStroke();", 'brush.set("2B", "#000", 1);'))
    assert "syntax error" in static_problems(good[:-1])
    assert any("createCanvas" in p for p in static_problems(good.replace("WEBGL", "P2D")))
    two_vertices = re.sub(r"(  brush\.vertex\([^)]*\);\n)+", "  brush.vertex(1, 2);\n  brush.vertex(3, 4);\n", good, count=1)
    assert any(p.startswith("bad endShape") for p in static_problems(two_vertices))


def test_build_is_deterministic_and_seeded():
    a, b = build_corpus(3, seed=0), build_corpus(3, seed=0)
    assert a == b
    c = build_corpus(3, seed=1)
    assert [i.code for i in a if i.name.endswith("/0")] == [i.code for i in c if i.name.endswith("/0")]
    assert [i.code for i in a if not i.name.endswith("/0")] != [i.code for i in c if not i.name.endswith("/0")]
    with pytest.raises(ValueError):
        build_corpus(0)


def test_size_names_and_no_duplicates(corpus):
    assert len(BASES) >= 40
    assert len(corpus) == len(BASES) * VARIATIONS
    assert len({i.name for i in corpus}) == len(corpus)
    assert len({i.code for i in corpus}) == len(corpus)
    assert corpus[0] == make_variant(next(iter(BASES)), 0)


def test_subjects_cover_the_prompt_subjects(corpus):
    subjects = {i.subject for i in corpus}
    assert set(PromptsConfig().subjects) <= subjects
    assert len(subjects) >= 40


def test_every_variant_passes_our_static_checks(corpus):
    bad = {i.name: p for i in corpus if (p := static_problems(i.code))}
    assert bad == {}


def test_every_variant_passes_the_gate(corpus):
    from brushrl.gate.static import check_static

    cfg = GateConfig()
    verdicts = {i.name: check_static(as_reply(i.code), cfg, 600)[1] for i in corpus}
    failed = {name: (v.verdict, v.detail) for name, v in verdicts.items() if not v.passed}
    assert failed == {}


def test_variations_differ_in_geometry_and_colour(corpus):
    vertex = re.compile(r"brush\.vertex\((-?\d+), (-?\d+)\)")
    colour = re.compile(r'"(#[0-9a-f]{6})"')
    for base in BASES:
        variants = [i.code for i in corpus if i.name.split("/")[0] == base]
        geometries = {tuple(vertex.findall(c)) for c in variants}
        palettes = {tuple(colour.findall(c)) for c in variants}
        assert len(geometries) == VARIATIONS, f"{base}: repeated geometry"
        assert len(palettes) >= VARIATIONS // 2, f"{base}: too few palettes"


def test_sketch_style_numbers_in_range(corpus):
    lengths = [len(i.code) for i in corpus]
    assert 1200 <= min(lengths) and max(lengths) <= 4000
    assert 2000 <= statistics.mean(lengths) <= 3500
    for item in corpus:
        code = item.code
        opacities = [int(o) for o in re.findall(r'brush\.fill\("#[0-9a-f]{6}", (\d+)\)', code)]
        bleeds = [float(b) for b in re.findall(r"brush\.fillBleed\(([\d.]+)\)", code)]
        marks = code.count("brush.endShape(true)") + code.count("brush.circle(")
        assert opacities and all(150 <= o <= 235 for o in opacities), item.name
        assert bleeds and all(0.08 <= b <= 0.35 for b in bleeds), item.name
        assert 5 <= marks <= 30, item.name
        assert 'background("#f' in code, item.name  # a pale cream ground
        for x, y in re.findall(r"brush\.vertex\((-?\d+), (-?\d+)\)", code):
            assert -150 <= int(x) <= 750 and -150 <= int(y) <= 750, item.name


def test_as_reply_is_one_fenced_block_the_gate_extracts():
    from brushrl.gate.extract import extract_code

    code = make_variant("peach_hibiscus", 3).code
    reply = as_reply(code)
    assert reply.startswith("```js\n") and reply.endswith("\n```") and reply.count("```") == 2
    assert extract_code(reply).strip() == code


def test_system_prompt_lists_the_whitelist_and_a_valid_skeleton():
    for name in DEFAULT_WHITELIST:
        assert f"brush.{name}(" in SYSTEM_PROMPT
    assert "createCanvas(600, 600, WEBGL)" in SYSTEM_PROMPT
    skeleton = SYSTEM_PROMPT.split("```js\n")[1].split("```")[0]
    assert not _PARSER.parse(skeleton.encode()).root_node.has_error
    assert canonical_skeleton_matches(skeleton, make_variant("daisy", 0).code)
    small = build_system_prompt(["fill", "beginShape", "vertex", "endShape", "hatch"], canvas_size=512)
    assert "createCanvas(512, 512, WEBGL)" in small and "brush.hatch(...)" in small
    assert "brush.circle" not in small
    with pytest.raises(ValueError):
        build_system_prompt([])


def canonical_skeleton_matches(skeleton: str, code: str) -> bool:
    """The corpus sketches start exactly like the skeleton the prompt shows (up to the background)."""
    head = skeleton.split('  background("')[0]
    return code.startswith(head)


def test_user_prompts_and_chat_format():
    cfg = PromptsConfig()
    assert user_prompt("a coral poppy", cfg.template) == "Paint a coral poppy in loose watercolour."
    with pytest.raises(ValueError):
        user_prompt("a coral poppy", "Paint something.")
    first = sample_prompts(cfg, 20, random.Random(7))
    assert first == sample_prompts(cfg, 20, random.Random(7))
    assert all(any(p == user_prompt(s, cfg.template) for s in cfg.subjects) for p in first)
    assert len(set(first)) > 1
    msgs = chat_messages("sys", "usr")
    assert msgs == [{"role": "system", "content": "sys"}, {"role": "user", "content": "usr"}]
    assert resolve_system_prompt(cfg, list(DEFAULT_WHITELIST)) == SYSTEM_PROMPT
    assert resolve_system_prompt(PromptsConfig(system_prompt="x"), list(DEFAULT_WHITELIST)) == "x"


@pytest.mark.slow
def test_sample_renders_as_paint_in_chromium():
    """Three corpus variants from three templates (the training subject among them) paint."""
    from brushrl.gate.runtime import check_runtime
    from brushrl.render.browser import Renderer

    cfg = RenderConfig()
    names = [("peach_hibiscus", 1), ("daisy", 2), ("tulip", 3)]
    with Renderer.from_config(cfg) as renderer:
        for base, variant in names:
            item = make_variant(base, variant)
            result = renderer.render(item.code, seed=0, size=600, deadline_s=90, attempts=1)
            assert result.status == "ok", (item.name, result.status, result.js_errors, result.detail)
            assert result.js_errors == [], item.name
            assert result.paint_fraction > 0.02, (item.name, result.paint_fraction)
            assert check_runtime(result, GateConfig(), 600).passed, item.name


# ---------------------------------------------------------------- colour words and the header (issue 35)
def test_every_sketch_opens_with_its_subject_and_petal_colours(corpus):
    from brushrl.corpus.colours import PETAL_ROLES

    for item in corpus:
        lines = item.code.split("\n")
        at = next(i for i, line in enumerate(lines) if line.startswith("  background("))
        assert lines[at + 1] == f"  // {item.subject}", item.name
        decl = re.fullmatch(r'  const wash = "(#[0-9a-f]{6})", body = "(#[0-9a-f]{6})", deep = "(#[0-9a-f]{6})";',
                            lines[at + 2])
        assert decl, (item.name, lines[at + 2])
        named = dict(zip(PETAL_ROLES, decl.groups()))
        # Named fills paint exactly what the hex would: no role is left as a literal next to its name.
        literal = set(re.findall(r'brush\.fill\("(#[0-9a-f]{6})"', item.code))
        assert not literal & set(named.values()), item.name
        assert re.search(r"brush\.fill\((wash|body|deep), ", item.code), item.name


def test_canonical_sketches_keep_their_colours_through_the_header():
    """The pool's references are the canonical renders: the header must not change what is painted.
    Substituting the constants back gives every fill the palette colour it had before."""
    from brushrl.corpus.catalogue import BASES as bases
    from brushrl.corpus.templates import Knobs

    for base, fn in list(bases.items())[:12]:
        k = Knobs(None)
        _, plain = fn(k)
        item = make_variant(base, 0)
        consts = dict(re.findall(r'(wash|body|deep) = "(#[0-9a-f]{6})"', item.code))
        restored = re.sub(r"brush\.fill\((wash|body|deep), ", lambda m: f'brush.fill("{consts[m[1]]}", ', item.code)
        restored = "\n".join(line for line in restored.split("\n")
                             if not line.startswith(("  // " + item.subject, "  const wash")))
        assert restored == plain, base


def test_recolouring_spreads_colour_words_over_species_and_never_paints_an_unseen_pair(corpus):
    from brushrl.config import UNSEEN_SUBJECTS
    from brushrl.corpus.colours import COLOUR_WORDS, colour_word

    subjects = {item.subject for item in corpus}
    assert not subjects & set(UNSEEN_SUBJECTS)
    # every unseen pair's words are each in the corpus: the pair is new, its words are not
    words = {w for s in subjects for w in s.split()}
    for s in UNSEEN_SUBJECTS:
        assert colour_word(s) in COLOUR_WORDS and s.split()[-1] in words, s
    species_by_word: dict[str, set[str]] = {}
    for item in corpus:
        word = colour_word(item.subject)
        if word:
            species_by_word.setdefault(word, set()).add(item.subject.split(word, 1)[1].strip())
    thin = {w: len(s) for w, s in species_by_word.items() if len(s) < 5}
    assert not thin, f"colour words met by fewer than 5 species: {thin}"
    # about RECOLOUR_SHARE of the variants of colour-named bases are repainted, each in its new word
    from brushrl.corpus.build import RECOLOUR_SHARE, _recolour_word

    eligible = recoloured = 0
    for item in corpus:
        base, variant = item.name.split("/")
        if variant == "0" or colour_word(make_variant(base, 0).subject) is None:
            continue
        eligible += 1
        word = _recolour_word(base, random.Random(f"0:{base}:{variant}:0:colour"))
        if word is not None:
            recoloured += 1
            assert colour_word(item.subject) == word, item
    assert eligible > 300 and abs(recoloured / eligible - RECOLOUR_SHARE) < 0.08, (recoloured, eligible)
    assert all(re.match(r"an? [a-z]", i.subject) or not i.subject.startswith("a") for i in corpus)
    assert not [i.subject for i in corpus if re.match(r"a [aeiou]", i.subject)]


def test_colour_words_and_articles():
    from brushrl.corpus.colours import COLOUR_WORDS, colour_word, recoloured_subject, with_article

    assert {"red", "pink", "yellow", "white", "blue", "orange", "purple", "violet"} <= set(COLOUR_WORDS)
    assert not {"lilac", "lavender"} & set(COLOUR_WORDS)  # species, not colours
    assert colour_word("an orange marigold") == "orange" and colour_word("a daisy") is None
    assert recoloured_subject("a coral poppy", "coral", "orange") == "an orange poppy"
    assert recoloured_subject("a sprig of lilac", "lilac", "red") is None
    assert with_article("a apricot rose") == "an apricot rose" and with_article("an red rose") == "a red rose"
