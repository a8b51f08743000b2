from active_learning.card import model_card


def test_an_undefined_metric_shows_as_a_dash_said_to_be_undefined():
    """Held-out labels with no wrong step leave step F1 and the first-error metrics undefined:
    the card must not let a reader take the dash for a missing measurement or a 0."""
    metrics = {"step_auroc": None, "step_f1": None, "step_accuracy": 0.9, "n_steps": 10,
               "first_error_f1": None, "first_error_acc_erroneous": None, "first_error_acc_correct": 1.0,
               "n_solutions": 4, "n_labels": 4}
    card = model_card({"base": "tiny", "metrics": metrics}, "prm")
    assert "| step F1 (finding wrong steps, P(correct) < 0.5) | — | — |" in card
    assert "| no error claimed, on correct solutions | 1.000 | — |" in card
    assert "A value shown as — is undefined, not 0" in card
    defined = model_card({"base": "tiny", "metrics": metrics | {"step_f1": 0.5, "step_auroc": 0.8,
                                                                "first_error_f1": 0.6,
                                                                "first_error_acc_erroneous": 0.4}}, "prm")
    assert "undefined" not in defined


def test_the_card_says_how_long_the_solutions_it_was_trained_on_were():
    """A round may train at 1,024 tokens while prm score reads 2,048 by default: a reader must
    know what the model saw."""
    card = model_card({"base": "tiny", "steps": 20, "train_examples": 90, "config": {"max_length": 1024}}, "prm")
    assert "(90 labeled examples, 20 optimizer steps, solutions of up to 1,024 tokens)" in card
    assert "tokens)" not in model_card({"base": "tiny", "steps": 20}, "prm")
