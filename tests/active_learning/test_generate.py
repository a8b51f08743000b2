"""The generator's step parsing: one step a line, PRM800K's `# Answer` step last."""

from active_learning.generate import parse_solution


def test_steps_are_lines_and_the_answer_closes_them() -> None:
    text = "First, $2 + 3 = 5$.\n\nThen double it: $10$.\n# Answer\n\n10\nSome rambling after."
    assert parse_solution(text) == (["First, $2 + 3 = 5$.", "Then double it: $10$.", "# Answer\n\n10"], "10")
    assert parse_solution("We get 4.\n# Answer: 4") == (["We get 4.", "# Answer\n\n4"], "4")
    assert parse_solution("no answer here\nat all") == (["no answer here", "at all"], None)
    assert parse_solution("   \n\n") == ([], None)
    assert parse_solution("a\x00b\x07\n# Answer\n\n1\x00") == (["ab", "# Answer\n\n1"], "1")
