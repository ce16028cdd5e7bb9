"""A labelled corpus of (completion, gold, correct?) in the forms GSM8K and MATH-500 store
their golds, each labelled as a careful human grader would, scored through the public
`score()` and through the task's `reward()` (both answer formats). Agreement is 100%.

Golds: `gsm8k` rows are GSM8K's (a bare number after '####', commas removed by the task);
`math` rows are MATH-500's `answer` field as published (bare LaTeX: `\\begin{pmatrix}`,
`\\$18.90`, `10,\\!080`, `\\text{(C)}`, `25\\%`). Completions are what policies write: chat
answers ending in `\\boxed{}`, GSM8K-style `#### n`, and prose. The percent rule
(docs/tasks.md): a percent sign beside a number is ignored, and an answer written with one is
also read as its value over 100 (math-verify's own reading), so `25%` is right against 25 and
against 0.25, and `25` is right against `25\\%`.

Left out on purpose, as a grader could go either way: a rounded decimal for an exact
surd; `50\\%` against a fraction gold of 1/2 in a problem that asks for a fraction; `(1, 2)`
against a column-vector gold.
"""

import pytest

from grpo_ablate.config import specs_for
from grpo_ablate.tasks import get_task
from grpo_ablate.tasks.math import score

R, W = True, False  # right, wrong

COL = r"\begin{pmatrix} -1 \\ 3 \end{pmatrix}"
MAT = r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}"
ROT = r"\begin{pmatrix} \frac{1}{2} & -\frac{\sqrt{3}}{2} \\ \frac{\sqrt{3}}{2} & \frac{1}{2} \end{pmatrix}"
ROT_TRANSPOSED = (r"\begin{pmatrix} \frac{1}{2} & \frac{\sqrt{3}}{2} \\ -\frac{\sqrt{3}}{2} & \frac{1}{2}"
                  r" \end{pmatrix}")
CASES = r"\begin{cases} x^2 & \text{if } x \ge 0 \\ -x & \text{if } x < 0 \end{cases}"

MATH = [
    # ---- matrices and vectors: MATH-500 stores them bare, as \begin{pmatrix}...
    (rf"\boxed{{{COL}}}", COL, R),
    (rf"So the vector is ${COL}$.", COL, R),
    (rf"The answer is $\boxed{{{COL}}}$.", COL, R),
    (r"\boxed{\begin{pmatrix}-1\\3\end{pmatrix}}", COL, R),
    (r"\boxed{\begin{bmatrix} -1 \\ 3 \end{bmatrix}}", COL, R),
    (r"\boxed{\begin{pmatrix} 1 \\ 3 \end{pmatrix}}", COL, W),
    (r"\boxed{\begin{pmatrix} 3 \\ -1 \end{pmatrix}}", COL, W),
    (r"\boxed{3}", COL, W),
    (r"\boxed{\begin{pmatrix} -1 \\ 3 \\ 0 \end{pmatrix}}", COL, W),
    (rf"\boxed{{{MAT}}}", MAT, R),
    (r"\boxed{\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}}", MAT, R),
    (r"\boxed{\begin{pmatrix} 1 & 2 \\ 3 & 5 \end{pmatrix}}", MAT, W),
    (r"\boxed{\begin{pmatrix} 1 & 3 \\ 2 & 4 \end{pmatrix}}", MAT, W),
    (r"\boxed{4}", MAT, W),
    (rf"\boxed{{{ROT}}}", ROT, R),
    (r"\boxed{\begin{pmatrix} 0.5 & -\frac{\sqrt{3}}{2} \\ \frac{\sqrt{3}}{2} & 0.5 \end{pmatrix}}", ROT, R),
    (rf"\boxed{{{ROT_TRANSPOSED}}}", ROT, W),
    (r"\boxed{\begin{pmatrix} 2 \\ 0 \\ -5 \end{pmatrix}}", r"\begin{pmatrix} 2 \\ 0 \\ -5 \end{pmatrix}", R),
    (r"\boxed{\begin{pmatrix} 2 \\ 0 \\ 5 \end{pmatrix}}", r"\begin{pmatrix} 2 \\ 0 \\ -5 \end{pmatrix}", W),
    # ---- cases: piecewise answers, the same branches in any order
    (rf"\boxed{{{CASES}}}", CASES, R),
    (r"\boxed{\begin{cases} -x & \text{if } x < 0 \\ x^2 & \text{if } x \ge 0 \end{cases}}", CASES, R),
    (r"\boxed{\begin{cases} x^2 & x\geq 0 \\ -x & x<0 \end{cases}}", CASES, R),
    (r"\boxed{\begin{cases} x^2 & \text{if } x \ge 0 \\ x & \text{if } x < 0 \end{cases}}", CASES, W),
    (r"\boxed{\begin{cases} x^2 & \text{if } x > 0 \\ -x & \text{if } x < 0 \end{cases}}", CASES, W),
    (r"\boxed{\begin{cases} x^3 & \text{if } x \ge 0 \\ -x & \text{if } x < 0 \end{cases}}", CASES, W),
    (r"\boxed{x^2}", CASES, W),
    (r"\boxed{\begin{cases} x^2 & \text{if } x \ge 0 \end{cases}}", CASES, W),
    # ---- percents on the gold's side (MATH stores 25\%)
    (r"\boxed{25\%}", r"25\%", R),
    (r"\boxed{25}", r"25\%", R),
    (r"The answer is $25\%$.", r"25\%", R),
    (r"\boxed{25 \%}", r"25\%", R),
    (r"\boxed{25\text{\%}}", r"25\%", R),
    (r"\boxed{26\%}", r"25\%", W),
    (r"\boxed{2.5\%}", r"25\%", W),
    (r"\boxed{12.5\%}", r"12.5\%", R),
    (r"\boxed{12.5}", r"12.5\%", R),
    (r"\boxed{125}", r"12.5\%", W),
    # ---- money: MATH stores \$18.90 and \$32,\!348
    (r"\boxed{\$18.90}", r"\$18.90", R),
    (r"\boxed{18.90}", r"\$18.90", R),
    (r"\boxed{18.9}", r"\$18.90", R),
    (r"The cost is $\boxed{\$18.90}$.", r"\$18.90", R),
    (r"\boxed{\$18.09}", r"\$18.90", W),
    (r"\boxed{\$32,\!348}", r"\$32,\!348", R),
    (r"\boxed{32348}", r"\$32,\!348", R),
    (r"\boxed{\$32{,}348}", r"\$32,\!348", R),
    (r"\boxed{\$3,234.8}", r"\$32,\!348", W),
    (r"\boxed{\$0.50}", r"\$0.50", R),
    (r"\boxed{0.5}", r"\$0.50", R),
    (r"\boxed{\$5}", r"\$0.50", W),
    # ---- units in \text{} and \mbox{}
    (r"\boxed{5}", r"5\text{ cm}", R),
    (r"\boxed{5\text{ cm}}", r"5\text{ cm}", R),
    (r"\boxed{5 \text{ centimeters}}", r"5\text{ cm}", R),
    (r"\boxed{6\text{ cm}}", r"5\text{ cm}", W),
    (r"\boxed{5}", r"5\mbox{ inches}", R),
    (r"\boxed{5\mbox{ inches}}", r"5\mbox{ inches}", R),
    (r"\boxed{4\mbox{ inches}}", r"5\mbox{ inches}", W),
    (r"\boxed{5}", r"5\text{ in}^2", R),
    (r"\boxed{20\text{ square units}}", r"20", R),
    (r"\boxed{21}", r"20\text{ square units}", W),
    (r"\boxed{12\mbox{ cm}^2}", r"12", R),
    (r"\boxed{10 \text{ feet}}", r"10", R),
    # ---- degrees
    (r"\boxed{30^\circ}", r"30^\circ", R),
    (r"\boxed{30}", r"30^\circ", R),
    (r"\boxed{30^{\circ}}", r"30^\circ", R),
    (r"\boxed{30\degree}", r"30^\circ", R),
    (r"\boxed{30°}", r"30^\circ", R),
    (r"\boxed{60^\circ}", r"30^\circ", W),
    (r"\boxed{120^\circ}", r"120", R),
    (r"\boxed{210}", r"120^\circ", W),
    # ---- thousands separators as MATH writes them
    (r"\boxed{10080}", r"10,\!080", R),
    (r"\boxed{10,080}", r"10,\!080", R),
    (r"\boxed{10,\!080}", r"10,\!080", R),
    (r"\boxed{10{,}080}", r"10,\!080", R),
    (r"\boxed{1008}", r"10,\!080", W),
    (r"\boxed{1000}", r"1{,}000", R),
    (r"\boxed{1,000}", r"1{,}000", R),
    (r"\boxed{100}", r"1{,}000", W),
    (r"\boxed{1,000,000}", r"1,\!000,\!000", R),
    (r"\boxed{1000000}", r"1,\!000,\!000", R),
    # ---- intervals, unions, sets, tuples
    (r"\boxed{(-\infty, 2]}", r"(-\infty, 2]", R),
    (r"\boxed{(-\infty,2]}", r"(-\infty, 2]", R),
    (r"\boxed{(-\infty, 2)}", r"(-\infty, 2]", W),
    (r"\boxed{[2, \infty)}", r"(-\infty, 2]", W),
    (r"\boxed{[1,2)}", r"[1,2)", R),
    (r"\boxed{[1,2]}", r"[1,2)", W),
    (r"\boxed{(-\infty,0)\cup(1,\infty)}", r"(-\infty,0) \cup (1,\infty)", R),
    (r"\boxed{(1,\infty)\cup(-\infty,0)}", r"(-\infty,0) \cup (1,\infty)", R),
    (r"\boxed{(-\infty,0]\cup(1,\infty)}", r"(-\infty,0) \cup (1,\infty)", W),
    (r"\boxed{\{1, 2, 3\}}", r"\{1,2,3\}", R),
    (r"\boxed{\{3, 1, 2\}}", r"\{1,2,3\}", R),
    (r"\boxed{\{1, 2\}}", r"\{1,2,3\}", W),
    (r"\boxed{-3, 3}", r"-3, 3", R),
    (r"\boxed{3, -3}", r"-3, 3", R),
    (r"\boxed{\pm 3}", r"-3, 3", R),
    (r"\boxed{3}", r"-3, 3", W),
    (r"\boxed{(2, 3)}", r"(2, 3)", R),
    (r"\boxed{(3, 2)}", r"(2, 3)", W),
    (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)", R),
    (r"\boxed{(3, \pi/2)}", r"\left( 3, \frac{\pi}{2} \right)", R),
    (r"\boxed{(\pi/2, 3)}", r"\left( 3, \frac{\pi}{2} \right)", W),
    (r"\boxed{(1, -2, 5)}", r"(1,-2,5)", R),
    (r"\boxed{(1, 2, 5)}", r"(1,-2,5)", W),
    # ---- text answers
    (r"\boxed{\text{Evelyn}}", r"\text{Evelyn}", R),
    (r"\boxed{Evelyn}", r"\text{Evelyn}", R),
    (r"\boxed{\text{Aditi}}", r"\text{Evelyn}", W),
    (r"\boxed{\text{Monday}}", r"\text{Monday}", R),
    (r"\boxed{monday}", r"\text{Monday}", R),
    (r"\boxed{\text{Tuesday}}", r"\text{Monday}", W),
    (r"\boxed{\text{even}}", r"\text{even}", R),
    (r"\boxed{\text{odd}}", r"\text{even}", W),
    (r"\boxed{\text{neither}}", r"\text{neither}", R),
    # ---- multiple-choice letters, as MATH stores them: \text{(C)}
    (r"\boxed{\text{(C)}}", r"\text{(C)}", R),
    (r"\boxed{C}", r"\text{(C)}", R),
    (r"\boxed{(C)}", r"\text{(C)}", R),
    (r"\boxed{\textbf{(C)}}", r"\text{(C)}", R),
    (r"The answer is (C).", r"\text{(C)}", R),
    (r"\boxed{B}", r"\text{(C)}", W),
    (r"\boxed{\text{(D)}}", r"\text{(C)}", W),
    (r"The answer is (B).", r"\text{(C)}", W),
    (r"\boxed{A}", r"\text{A}", R),
    (r"\boxed{E}", r"\text{A}", W),
    # ---- negative numbers
    (r"\boxed{-7}", r"-7", R),
    (r"\boxed{7}", r"-7", W),
    (r"\boxed{−7}", r"-7", R),  # the Unicode minus sign
    (r"\boxed{-\frac{1}{2}}", r"-\frac{1}{2}", R),
    (r"\boxed{\frac{-1}{2}}", r"-\frac{1}{2}", R),
    (r"\boxed{\frac{1}{2}}", r"-\frac{1}{2}", W),
    (r"\boxed{-0.5}", r"-\frac12", R),
    # ---- scientific notation
    (r"\boxed{3.2 \times 10^{5}}", r"320000", R),
    (r"\boxed{3.2\cdot 10^5}", r"3.2 \times 10^5", R),
    (r"\boxed{1.2e5}", r"120000", R),
    (r"\boxed{3.2 \times 10^{6}}", r"3.2 \times 10^5", W),
    (r"\boxed{4 \times 10^{-3}}", r"0.004", R),
    (r"\boxed{4E-3}", r"0.004", R),
    (r"\boxed{4 \times 10^{3}}", r"0.004", W),
    # ---- answers followed by prose (the final \boxed{} is the answer)
    (r"\boxed{5}. This is because 2+3=5 and not 6.", r"5", R),
    (r"The answer is $\boxed{2}$. Check: 1+1=2, not 3.", r"2", R),
    (r"\boxed{2}" "\n\nNote: some might think the answer is 3.", r"2", R),
    (r"First I guessed \boxed{3}, but recomputing gives \boxed{4}.", r"4", R),
    (r"First I guessed \boxed{4}, but recomputing gives \boxed{3}.", r"4", W),
    (r"The final answer is $\boxed{\frac{14}{3}}$. I hope it is correct.", r"\frac{14}{3}", R),
    (r"Thus $x = \boxed{6 - 5i}$, which we can verify by substitution.", r"6 - 5i", R),
    (r"Thus $x = \boxed{6 + 5i}$, which we can verify by substitution.", r"6 - 5i", W),
    # ---- golds already delimited: every member of DELIMITERS is read as it stands
    (r"\boxed{\frac{1}{2}}", r"$\frac{1}{2}$", R),
    (r"\boxed{3}", r"\(3\)", R),
    (r"\boxed{4}", r"\[3\]", W),
    (r"\boxed{x^2}", r"\boxed{x^2}", R),
    (r"\boxed{x^3}", r"\boxed{x^2}", W),
    # ---- the rest of MATH's usual forms
    (r"\boxed{\frac{\sqrt{2}}{2}}", r"\frac{\sqrt{2}}{2}", R),
    (r"\boxed{\frac{1}{\sqrt{2}}}", r"\frac{\sqrt{2}}{2}", R),
    (r"\boxed{\sqrt{2}}", r"\frac{\sqrt{2}}{2}", W),
    (r"\boxed{\dfrac{14}{3}}", r"\frac{14}{3}", R),
    (r"\boxed{4\frac{2}{3}}", r"\frac{14}{3}", R),  # a mixed number, as MATH writes them
    (r"\boxed{x^2+2x+1}", r"x^2+2x+1", R),
    (r"\boxed{(x+1)^2}", r"x^2+2x+1", R),
    (r"\boxed{x^2+2x-1}", r"x^2+2x+1", W),
    (r"\boxed{p-q}", r"p - q", R),
    (r"\boxed{q-p}", r"p - q", W),
    (r"\boxed{y = 2x + 3}", r"y=2x+3", R),
    (r"\boxed{y = 3x + 2}", r"y=2x+3", W),
    (r"\boxed{11\sqrt{2}}", r"11\sqrt2", R),
    (r"\boxed{\pi}", r"\pi", R),
    (r"\boxed{3.14}", r"\pi", W),
]

GSM8K = [
    # ---- percents on the answer's side: GSM8K stores the bare number
    (r"\boxed{25\%}", "25", R),
    (r"\boxed{25}", "25", R),
    ("So the discount is 25%.\n#### 25", "25", R),
    ("So the discount is 25%.\n#### 25%", "25", R),
    (r"The percentage is $\boxed{25\%}$.", "25", R),
    ("The answer is 25 percent.", "25", R),
    (r"\boxed{30\%}", "25", W),
    (r"\boxed{0.25}", "25", W),
    (r"\boxed{50\%}", "0.5", R),
    ("#### 50%", "0.5", R),
    # ---- money: GSM8K completions write $ in prose
    ("He pays $5 for apples and $3 for pears, so he pays $8 in total.\n#### 8", "8", R),
    ("He pays $5 for apples and $3 for pears, so he pays $8 in total.\n#### 5", "8", W),
    (r"So she earns $\boxed{\$18}$.", "18", R),
    (r"\boxed{\$18.00}", "18", R),
    ("She has $1,250 left.\n#### $1,250", "1250", R),
    ("She has $1,250 left.\n#### 1,205", "1250", W),
    # ---- thousands separators
    ("#### 1,000", "1000", R),
    (r"\boxed{1,000}", "1000", R),
    ("The answer is 1,000.", "1000", R),
    (r"\boxed{100}", "1000", W),
    ("#### 120,000", "120000", R),
    # ---- negatives and decimals
    ("#### -5", "-5", R),
    ("#### 5", "-5", W),
    (r"\boxed{-5}", "-5", R),
    ("#### 2.5", "2.5", R),
    (r"\boxed{\frac{5}{2}}", "2.5", R),
    ("#### 2.6", "2.5", W),
    # ---- units and prose after the answer
    (r"\boxed{12\text{ apples}}", "12", R),
    (r"\boxed{12 \text{ hours}}", "12", R),
    ("15 - 12 = 3 so 3 hours.\n#### 3", "3", R),
    ("15 - 12 = 4\n#### 4", "3", W),
    (r"So the answer is \boxed{72}. She sold 72 clips in all.", "72", R),
    (r"So the answer is \boxed{48}. She sold 72 clips in all.", "72", W),
    ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72", R),
]


@pytest.mark.parametrize(("completion", "gold", "correct"), MATH + GSM8K,
                         ids=[f"{i}" for i in range(len(MATH) + len(GSM8K))])
def test_score_agrees_with_the_graders_label(completion, gold, correct):
    assert score(completion, gold) == (1.0 if correct else 0.0), (completion, gold)


def test_corpus_covers_every_form_in_both_directions():
    assert len(MATH) + len(GSM8K) >= 150
    labels = [c for _, _, c in MATH + GSM8K]
    assert labels.count(R) >= 60 and labels.count(W) >= 60  # not a one-sided corpus


@pytest.fixture(scope="module")
def tasks():
    """The math task in its two gold formats (GSM8K's '#### n' and MATH-500's plain answer),
    with no format reward, so reward() is the correctness score alone."""
    out = {}
    for fmt in ("gsm8k", "plain"):
        (spec,) = specs_for(["task=math", f"task.answer_format={fmt}", "task.format_weight=0"],
                            multirun=False)
        out[fmt] = get_task(spec.config["task"])
    return out


def test_reward_agrees_with_the_labels_for_both_gold_formats(tasks):
    rows = ([("gsm8k", {"question": "q", "answer": f"Worked solution.\n#### {g}"}, c, ok)
             for c, g, ok in GSM8K]
            + [("plain", {"question": "q", "answer": g}, c, ok) for c, g, ok in MATH])
    wrong = []
    for fmt, row, completion, ok in rows:
        got = tasks[fmt].reward([completion], row=[row])
        if got != [1.0 if ok else 0.0]:
            wrong.append((fmt, completion, row["answer"], got))
    assert wrong == []
