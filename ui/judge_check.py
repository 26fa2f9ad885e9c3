"""The judge-check section: does the chosen judge grade two reference models' answers like the official GPT-4
judge? It sits in the Grade view's setup column, after the Grade buttons (hidden for the offline baseline)."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from mmvet_core.service import JUDGE_BASELINE

from .common import Page, esc, judge_of, toasts, visitor


@dataclass
class JudgeCheckView:
    section: gr.Accordion
    button: gr.Button
    report: gr.Textbox


def build_judge_check(page: Page) -> JudgeCheckView:
    """Lay out the (collapsed) judge-check section: an explanation, the button and the report."""
    with gr.Accordion("Check this judge first (is it close to the official GPT-4 judge?)", open=False,
                      elem_id="judge-check-section", visible=page.default_judge != JUDGE_BASELINE) as section:
        gr.Markdown("The judge grades two reference models' answers (LLaVA-1.5 13b and 7b, 436 calls at "
                    "most; stored answers are reused) whose official GPT-4-0613 grades are known, and the "
                    "report says how far it is from them, beside GPT-4's own run-to-run spread.")
        button = gr.Button("Check this judge", size="sm", elem_id="judge-check-button")
        report = gr.Textbox(label="Judge check", lines=4, max_lines=30, interactive=False,
                            elem_id="judge-check-report", buttons=["copy"])
    return JudgeCheckView(section, button, report)


def wire_judge_check(page: Page, jc: JudgeCheckView, judge_choice: gr.Radio, base_url: gr.Textbox,
                     judge_model: gr.Textbox, api_key: gr.Textbox) -> None:
    """Start a check with the Grade view's judge fields; the report follows it (polled while it runs) and is
    re-read when the judge fields change."""
    svc = page.svc
    check_timer = gr.Timer(1.0, active=False)

    @toasts(2)
    def check_judge(judge_c, url, model, key, owner_tok, request: gr.Request):
        message = svc.check_judge(judge_of(judge_c, url, model, key), owner_tok, visitor(svc, request))
        gr.Info(esc(message))
        return check_text(judge_c, url, model, key, owner_tok)

    def check_text(judge_c, url, model, key, owner_tok):
        text, running = svc.judge_check_text(judge_of(judge_c, url, model, key), owner_tok)
        return text, gr.Timer(active=running)

    check_inputs_j = [judge_choice, base_url, judge_model, api_key, page.owner]
    jc.button.click(check_judge, check_inputs_j, [jc.report, check_timer], api_visibility="private")
    check_timer.tick(check_text, check_inputs_j, [jc.report, check_timer], api_visibility="private",
                     show_progress="hidden")
    judge_choice.change(check_text, check_inputs_j, [jc.report, check_timer], api_visibility="private")
    for box in (base_url, judge_model, api_key):     # (on blur: a base URL is checked when it is used)
        box.blur(check_text, check_inputs_j, [jc.report, check_timer], api_visibility="private")
