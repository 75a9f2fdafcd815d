#!/usr/bin/env python3
"""Which sentence segmenter should `seq2seq translate` use? Accuracy and speed of four, and of ours.

    benchmarks/sentence_split.py --out results/bench/sentence_split.json

Each segmenter from PyPI (sentencex, pysbd, blingfire, syntok; `pip install` them first)
splits the hand-made cases below: English and French texts with abbreviations (Dr., M., Mme,
p.m., e.g., etc.), decimal numbers, initials, ellipses, quotes and brackets, each written as
its sentences. A case is right when the segmenter gives exactly those sentences (surrounding
whitespace ignored). Speed: sentences per second over every case, repeated, on this machine's
CPU (one thread), with the load average beside it. Prints one markdown table; --out also
writes the figures as JSON.
"""

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch
from measure import device_name

from seq2seq.decoding.sentences import split_line

# Each case: its sentences, in order; the text is them joined by a space.
CASES = {
    "en": [
        ["Dr. Smith will see you at 3 p.m. tomorrow.", "Please arrive early."],
        ["Mr. and Mrs. Brown live in St. Louis.", "They moved there in 2019."],
        ["The price rose by 3.5 percent.", "Analysts expected 2.1."],
        ["Bring fruit, e.g. apples or pears.", "Don't forget water."],
        ["I waited... and waited.", "Nobody came."],
        ['He said, "I am tired."', "Then he went to bed."],
        ["Is it raining?", "Take an umbrella!", "It's cold outside."],
        ["The meeting starts at 9 a.m. sharp."],
        ["J. R. R. Tolkien wrote The Hobbit.", "It was published in 1937."],
        ["We sell books, pens, etc. at the shop.", "Come and see."],
        ["My flight leaves at 10:45.", "The gate is B12."],
        ["Prof. Adams teaches at the U.S. Naval Academy.", "She likes it."],
        ["Call me at 555-0142.", "I'm free after lunch."],
        ["The total is $12.50.", "Pay at the counter."],
        ["She works for Acme Inc. in Boston."],
        ["What a day!", "I'm exhausted."],
        ["Wait...", "What did you say?"],
        ["The U.K. voted in 2016.", "The result surprised many."],
        ["See you on Jan. 5 at the station."],
        ["It costs approx. 40 euros.", "That's cheap."],
        ["Version 2.0 fixed the bug.", "Version 2.1 added features."],
        ['"Where are you going?" she asked.', "I didn't answer."],
        ["Gen. Patton led the Third Army.", "He was born in California."],
        ["The file is report.pdf.", "Open it with any reader."],
        ["I have two cats (Tom and Jerry).", "They sleep all day."],
        ["Visit www.example.com for details.", "It's free."],
        ["Send it to anna.smith@example.org today.", "Thanks."],
        ["Hello.", "Goodbye."],
        ["No. 10 Downing Street is in London."],
        ["The train left at 6 p.m. and arrived at midnight."],
        ["He scored 9.5 out of 10!", "Amazing."],
        ["Ms. Lee signed the contract on Friday.", "Work begins Monday."],
        ["It was 5 ft. 10 in. tall.", "Nobody could reach the top."],
        ["I like Paris.", "I love Rome.", "I adore Lisbon."],
        ["Mrs. Smith met Mr. Jones at the station."],
        ["Good morning.", "Dr. Lee is waiting for you."],
        ["I saw Sen. Warren and Rep. Lewis there."],
        ["The meeting is at 11 a.m.", "Don't be late."],
    ],
    "fr": [
        ["M. Dupont arrive demain à 15 h.", "Il prendra le train."],
        ["Mme Martin habite à Saint-Louis.", "Elle y est née."],
        ["Le prix a augmenté de 3,5 %.", "Personne ne s'y attendait."],
        ["Apportez des fruits, p. ex. des pommes.", "N'oubliez pas l'eau."],
        ["J'ai attendu... et attendu.", "Personne n'est venu."],
        ["Il a dit : « Je suis fatigué. »", "Puis il est allé dormir."],
        ["Est-ce qu'il pleut ?", "Prends un parapluie !", "Il fait froid."],
        ["Le Dr Lambert consulte le lundi.", "Prenez rendez-vous."],
        ["La réunion commence à 9 h 30 précises."],
        ["Nous vendons des livres, des stylos, etc. au magasin.", "Venez voir."],
        ["Mon vol part à 10 h 45.", "La porte est B12."],
        ["Le Pr Durand enseigne à Lyon.", "Il aime ça."],
        ["Appelez-moi au 06 12 34 56 78.", "Je suis libre après midi."],
        ["Le total est de 12,50 €.", "Payez à la caisse."],
        ["Elle travaille pour la SNCF à Lille."],
        ["Quelle journée !", "Je suis épuisé."],
        ["Attends...", "Qu'est-ce que tu as dit ?"],
        ["J.-P. Sartre est né en 1905.", "Il est mort en 1980."],
        ["Rendez-vous le 5 janv. à la gare."],
        ["Cela coûte env. 40 euros.", "C'est bon marché."],
        ["La version 2.0 a corrigé le bogue.", "La version 2.1 a ajouté des fonctions."],
        ["« Où vas-tu ? » demanda-t-elle.", "Je n'ai pas répondu."],
        ["MM. Leblanc et Moreau sont arrivés.", "La séance peut commencer."],
        ["Le fichier s'appelle rapport.pdf.", "Ouvrez-le."],
        ["J'ai deux chats (Tom et Félix).", "Ils dorment toute la journée."],
        ["Visitez www.exemple.fr pour en savoir plus.", "C'est gratuit."],
        ["Écrivez à anne.martin@exemple.fr aujourd'hui.", "Merci."],
        ["Bonjour.", "Au revoir."],
        ["Voir le chap. 3 pour les détails."],
        ["Le train est parti à 18 h et arrivé à minuit."],
        ["Il a eu 9,5 sur 10 !", "Incroyable."],
        ["Mlle Roux a signé le contrat vendredi.", "Les travaux commencent lundi."],
        ["Il habite au 12 bd Saint-Michel.", "C'est au troisième étage."],
        ["J'aime Paris.", "J'adore Rome.", "Je rêve de Lisbonne."],
        ["M. Dupont habite à Saint-Louis."],
        ["Je vois M. Leroy demain."],
        ["Mme Martin et M. Dupont sont là."],
        ["Bonjour.", "M. Dupont habite ici."],
        ["Le Dr. Martin est là.", "Entrez."],
        ["Il est arrivé à 8 h 15.", "Le cours a commencé."],
    ],
}

Splitter = Callable[[str], list[str]]


def splitters(language: str) -> dict[str, Splitter]:
    """Each segmenter as text -> its sentences, stripped."""
    import blingfire
    import pysbd
    import sentencex
    from syntok import segmenter

    sbd = pysbd.Segmenter(language=language, clean=False)

    def syntok_split(text: str) -> list[str]:
        return [
            "".join(str(token) for token in sentence).strip()
            for paragraph in segmenter.analyze(text)
            for sentence in paragraph
        ]

    return {
        "sentencex": lambda text: [s.strip() for s in sentencex.segment(language, text)],
        "pysbd": lambda text: [s.strip() for s in sbd.segment(text)],
        "blingfire": lambda text: blingfire.text_to_sentences(text).split("\n"),
        "syntok": syntok_split,
        # what seq2seq translate uses: sentencex, a sentence ending in a title joined to the next
        "seq2seq (sentencex + titles)": lambda text: split_line(text, language)[0],
    }


def accuracy(split: Splitter, cases: list[list[str]]) -> tuple[int, list[str]]:
    """How many cases `split` gets exactly right, and the texts of those it gets wrong."""
    wrong = [" ".join(case) for case in cases if split(" ".join(case)) != case]
    return len(cases) - len(wrong), wrong


def speed(split: Splitter, cases: list[list[str]], seconds: float = 2.0) -> float:
    """Sentences per second: every case split again and again for about `seconds`."""
    texts = [" ".join(case) for case in cases]
    sentences = sum(len(case) for case in cases)
    rounds, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for text in texts:
            split(text)
        rounds += 1
    return rounds * sentences / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    for language, cases in CASES.items():
        for name, split in splitters(language).items():
            right, wrong = accuracy(split, cases)
            results.setdefault(name, {})[language] = {
                "right": right,
                "cases": len(cases),
                "sentences_per_s": round(speed(split, cases)),
                "wrong": wrong,
            }
    print(f"CPU: {device_name(torch.device('cpu'))}\n")
    print("| segmenter | en right | fr right | en sentences/s | fr sentences/s |")
    print("|---|---|---|---|---|")
    for name, by_language in results.items():
        en, fr = by_language["en"], by_language["fr"]
        print(
            f"| {name} | {en['right']}/{en['cases']} | {fr['right']}/{fr['cases']} | "
            f"{en['sentences_per_s']:,} | {fr['sentences_per_s']:,} |"
        )
    if args.out:
        load = os.getloadavg()[0]  # other processes slow every segmenter alike
        payload = {
            "kind": "sentence-split",
            "command": "benchmarks/sentence_split.py --out " + str(args.out),
            "cpu": device_name(torch.device("cpu")),
            "cores": os.cpu_count(),
            "load": load,
            "segmenters": results,
        }
        args.out.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
