"""The papers servegym cites, by short name: each defined once with its full reference.
Code, docs and generated reports cite a paper as ``<short name> §<section>`` (or Fig., Table,
Alg., eq.); ``docs/references.md`` lists them. In ``hardware`` (the lowest layer) so that every
layer's report generator can name them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    """One paper: authors, title, where and when it appeared, and a link (arXiv or DOI) when it has one."""

    short: str
    authors: str
    title: str
    venue: str
    year: int
    link: str = ""

    def __str__(self) -> str:
        link = f" {self.link}" if self.link else ""
        return f"{self.authors}. {self.title}. {self.venue}, {self.year}.{link}"


PAPERS = {
    "Llumnix-K": Reference(
        "Llumnix-K", "Anders Vestrum, Arya Raeesi, Hanna Rød",
        "Beyond Binary Priorities: Multi-Tier SLA Scheduling for Large Language Model Serving",
        "UC Berkeley EECS Department, report", 2025),
    "PASCAL": Reference(
        "PASCAL", "Eunyeong Cho, Jehyeon Bang, Ranggi Hwang, Minsoo Rhu",
        "PASCAL: A Phase-Aware Scheduling Algorithm for Serving Reasoning-based Large Language Models",
        "preprint (KAIST, UNIST)", 2025),
    "Cauchy": Reference(
        "Cauchy", "Yihui Zhang, Han Shen, Renyu Yang, Di Tian, Yuxi Luo, Menghao Zhang, Li Li, Chunming Hu, Tianyu Wo, "
        "Chengru Song, Jin Ouyang",
        "CAUCHY: A Cost-Efficient LLM Serving System through Adaptive Heterogeneous Deployment",
        "ACM Symposium on Cloud Computing (SoCC '25)", 2025, "https://doi.org/10.1145/3772052.3772264"),
    "Cascadia": Reference(
        "Cascadia", "Youhe Jiang, Fangcheng Fu, Wanru Zhao, Stephan Rabanser, Jintao Zhang, Nicholas D. Lane, Binhang Yuan",
        "Cascadia: An Efficient Cascade Serving System for Large Language Models", "arXiv preprint", 2025,
        "https://arxiv.org/abs/2506.04203"),
    "CascadeServe": Reference(
        "CascadeServe", "Ferdi Kossmann, Ziniu Wu, Alex Turk, Nesime Tatbul, Lei Cao, Samuel Madden",
        "CascadeServe: Unlocking Model Cascades for Inference Serving", "arXiv preprint", 2024,
        "https://arxiv.org/abs/2406.14424"),
}


def reference(short: str) -> Reference:
    """The paper ``short`` names; an unknown short name raises, listing the known ones."""
    if short not in PAPERS:
        raise ValueError(f"unknown paper {short!r}; known: {sorted(PAPERS)}")
    return PAPERS[short]


def references_markdown() -> str:
    """The references page's list: one line per paper, short name first."""
    return "\n".join(f"- **{paper.short}**: {paper}" for paper in PAPERS.values()) + "\n"
