"""Rebuild the held-out DOCX and PDF theses from the hand-written text below.

Run from the repository root: ``.venv/bin/python tests/analysis/heldout/build_binaries.py``.
The binaries are committed; this script documents how they were made (python-docx and
LibreOffice are not available here, so the minimal writers in ``tests/analysis/builders.py``
are used). DOCX paragraphs are lists of runs, with markers deliberately split across runs the
way Word splits them after edits; an int is a footnote reference.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.analysis.builders import make_docx, text_pdf  # noqa: E402

APA_NURSING: list[list[str | int]] = [
    ["Nurse Staffing and Patient Falls in Acute Care Hospitals"],
    ["Capstone thesis, Bachelor of Science in Nursing"],
    ["Literature Review"],
    [
        "Falls are among the most frequent adverse events in hospitals, at 3 to 5 per 1,000 "
        "patient-days (Bouldin et\u00a0al., 2013). ",
        "Aiken",
        " et al. (2002) found that each additional patient per nurse raised the odds of death "
        "within 30 days by 7% (OR = 1.07), a result replicated in a larger sample ",
        "(see also Needleman",
        " et al., 2011).",
    ],
    [
        "For falls specifically, the evidence is weaker (Staggs & Dunton, 2014; Twigg et al., "
        "2011). Oliver et al. (2010, p.\u00a046) call most prevention programmes \u201cpoorly "
        "specified\u201d, and the national toolkit (Agency for Healthcare Research and Quality "
        "[AHRQ], 2013) has been adopted unevenly (AHRQ, 2013). Bedside tools developed by "
        "Dykes were tested in two trials (Dykes, 2010a, 2010b).",
    ],
    [
        "Not every study agrees. An earlier analysis by the same group reported no trend "
        "(Bouldin et al., 2012), and a secondary analysis of the staffing data found a weaker "
        "association (Stagg & Dunton, 2014). Rehabilitation units were excluded in most studies "
        "(Cameron et al., 2018; see Table\u00a02), and the role of sitters is disputed (Hill, 2015).",
    ],
    ["References"],
    [
        "Agency for Healthcare Research and Quality. (2013). Preventing falls in hospitals: A "
        "toolkit for improving quality of care (AHRQ Publication No. 13-0015-EF). AHRQ."
    ],
    [
        "Aiken, L. H., Clarke, S. P., Sloane, D. M., Sochalski, J., & Silber, J. H. (2002). "
        "Hospital nurse staffing and patient mortality, nurse burnout, and job dissatisfaction. "
        "JAMA, 288(16), 1987\u20131993. https://doi.org/10.1001/jama.288.16.1987"
    ],
    [
        "Bouldin, E. L. D., Andresen, E. M., Dunton, N. E., Simon, M., Waters, T. M., Liu, M., "
        "Daniels, M. J., Mion, L. C., & Shorr, R. I. (2013). Falls among adult patients "
        "hospitalized in the United States: Prevalence and trends. Journal of Patient Safety, "
        "9(1), 13\u201317. https://doi.org/10.1097/PTS.0b013e3182699b64"
    ],
    [
        "Dykes, P. C. (2010a). Fall prevention in acute care hospitals: A randomized trial. "
        "JAMA, 304(17), 1912\u20131918. https://doi.org/10.1001/jama.2010.1567"
    ],
    [
        "Dykes, P. C. (2010b). Fall TIPS: Strategies to promote adoption and use of a fall "
        "prevention toolkit. Journal of Nursing Administration, 40(7/8), 330\u2013335."
    ],
    [
        "Hill, K. D. (2015). Sitters and falls: A cohort study in two hospitals. Australasian "
        "Journal on Ageing, 34(2), 101\u2013106."
    ],
    [
        "Hill, K. D. (2015). Patient education to prevent falls among older hospital "
        "inpatients. JAMA Internal Medicine, 175(5), 724\u2013730. "
        "https://doi.org/10.1001/jamainternmed.2015.0191"
    ],
    [
        "Needleman, J., Buerhaus, P., Pankratz, V. S., Leibson, C. L., Stevens, S. R., & "
        "Harris, M. (2011). Nurse staffing and inpatient hospital mortality. New England "
        "Journal of Medicine, 364(11), 1037\u20131045. doi:10.1056/NEJMsa1001025"
    ],
    [
        "Oliver, D., Healey, F., & Haines, T. P. (2010). Preventing falls and fall-related "
        "injuries in hospitals. Clinics in Geriatric Medicine, 26(4), 645\u2013692. "
        "https://doi.org/10.1016/j.cger.2010.06.005"
    ],
    [
        "Staggs, V. S., & Dunton, N. (2014). Associations between rates of unassisted inpatient "
        "falls and levels of registered and non-registered nurse staffing. International "
        "Journal for Quality in Health Care, 26(1), 87\u201392. https://doi.org/10.1093/intqhc/mzt080"
    ],
    [
        "Twigg, D., Duffield, C., Bremner, A., Rapley, P., & Finn, J. (2011). The impact of the "
        "nursing hours per patient day (NHPPD) staffing method on patient outcomes: A "
        "retrospective analysis of patient and staffing data. International Journal of Nursing "
        "Studies, 48(5), 540\u2013548. https://doi.org/10.1016/j.ijnurstu.2010.07.013"
    ],
    [
        "Wong, C. A. (2014). Authentic leadership and nurse-assessed adverse patient outcomes. "
        "Journal of Nursing Management, 22(8), 1045\u20131054. https://doi.org/10.111/jonm.12043"
    ],
]

GERMAN_LEHRKRAEFTE: list[list[str | int]] = [
    ["Lehrkräftemangel und Seiteneinstieg in Sachsen"],
    ["Masterarbeit im Fach Erziehungswissenschaft"],
    ["1 Einleitung"],
    [
        "Seit dem Schuljahr 2016/17 stellt Sachsen mehr Seiteneinsteigende als grundständig "
        "ausgebildete Lehrkräfte ein (vgl. Klemm 2020, S.\u00a04). Die Kultusministerkonferenz "
        "rechnet bis 2035 mit einer Lücke von mehreren zehntausend Stellen (KMK 2022). Terhart "
        "(2011) hatte früh vor dieser Entwicklung gewarnt. ",
        "Porsch/Reintjes",
        " (2023) zeigen, dass Seiteneinsteigende den Beruf häufiger wieder verlassen "
        "(ebd., S.\u00a089).",
        1,
    ],
    ["2 Forschungsstand"],
    [
        "Die Befunde zur Wirksamkeit von Seiteneinsteigenden sind uneinheitlich (Kunter u.\u00a0",
        "a. 2013; Kleickmann/Anders 2011). Richter u.\u00a0a. (2014) finden keine Unterschiede "
        "in den Leistungen der Schülerinnen und Schüler, Lucksnat u.\u00a0a. (2022) dagegen "
        "Nachteile im Klassenmanagement (ebd., S.\u00a09). Die Zahl von 1.437 Neueinstellungen "
        "im Jahr 2019 (Tab. 2) unterstreicht die Relevanz.",
    ],
    [
        "Schon Klemm (2019) hatte vergleichbare Zahlen vorgelegt. Eine Replikation bestätigt "
        "die Nachteile im Klassenmanagement (Lucksant u.\u00a0a. 2022), andere Autorinnen "
        "relativieren sie (Zorn 2020). Grundlegend zur professionellen Kompetenz ist Baumert "
        "(2006).",
    ],
    ["Literaturverzeichnis"],
    [
        "Baumert, Jürgen (2006): Was wissen wir über die Entwicklung von Schulleistungen? In: "
        "Pädagogik 58 (4), S. 40\u201346."
    ],
    [
        "Baumert, Jürgen (2006): Stichwort: Professionelle Kompetenz von Lehrkräften. In: "
        "Zeitschrift für Erziehungswissenschaft 9 (4), S. 469\u2013520. DOI: "
        "10.1007/s11618-006-0165-2."
    ],
    [
        "Kleickmann, Thilo/Anders, Yvonne (2011): Lernen an der Universität. In: Kunter, M. "
        "u.\u00a0a. (Hrsg.): Professionelle Kompetenz von Lehrkräften. Münster: Waxmann, "
        "S. 305\u2013315."
    ],
    ["Klemm, Klaus (2020): Lehrkräftemangel in den MINT-Fächern. Essen: Stiftung Mercator."],
    [
        "Kultusministerkonferenz (KMK) (2022): Lehrkräfteeinstellungsbedarf und -angebot in "
        "der Bundesrepublik Deutschland 2021\u20132035. Berlin: KMK."
    ],
    [
        "Kunter, Mareike/Klusmann, Uta/Baumert, Jürgen u.\u00a0a. (2013): Professional "
        "competence of teachers. In: Journal of Educational Psychology 105 (3), S. 805\u2013820. "
        "doi:10.1037/a0032583"
    ],
    [
        "Lucksnat, Christin/Richter, Eric/Schipolowski, Stefan u.\u00a0a. (2022): Comparing the "
        "teaching quality of alternatively certified teachers and traditionally certified "
        "teachers. In: Teaching and Teacher Education 117, Art. 103784. "
        "doi:10.1016/j.tate.2022.103784"
    ],
    [
        "Porsch, Raphaela/Reintjes, Christian (Hrsg.) (2023): Professionalisierung im "
        "Seiteneinstieg. Münster: Waxmann."
    ],
    [
        "Richter, Dirk/Kunter, Mareike/Lüdtke, Oliver u.\u00a0a. (2014): Soziale Unterstützung "
        "beim Berufseinstieg ins Lehramt. In: Zeitschrift für Erziehungswissenschaft 17 (1), "
        "S. 1\u201324. doi:10.3262/"
    ],
    [
        "Terhart, Ewald (2011): Lehrerberuf und Professionalität. In: Helsper, W./Tippelt, R. "
        "(Hrsg.): Pädagogische Professionalität. Weinheim: Beltz, S. 202\u2013224."
    ],
    [
        "Zlatkin-Troitschanskaia, Olga (2019): Hochschulbildung und Kompetenzmessung. "
        "Wiesbaden: Springer VS."
    ],
]
GERMAN_FOOTNOTES = {1: "Ausführlich dazu (vgl. Terhart 2011, S. 205 ff.)."}

HARVARD_HOUSING = [
    "Community Land Trusts and Housing Affordability in English Cities",
    "MSc dissertation, School of Planning",
    "1 Introduction",
    "Between 1997 and 2021 the ratio of median house prices to median earnings in England rose "
    "from 3.5 to 9.1 (ONS 2022). Community land trusts (CLTs) promise permanently affordable homes "
    "by separating the value of land from that of buildings (Davis 2010, p. 7). Their number has "
    "grown from a handful in 2008 to more than 500 today (Moore and McKee 2012; Moore 2018).",
    "Critics argue that CLTs remain too small to matter (Bailey 2012) and depend on volunteers who "
    "are older, whiter and wealthier than their neighbours (Engelsman, Rowe and Southern 2016). "
    "Others see them as a laboratory for new forms of ownership (Thompson 2020: 83; Bunce 2016).",
    "2 Methods",
    "Twelve CLTs were sampled (Table 2), and 31 interviews were coded thematically (Braun and Clarke "
    "2006). Thematic saturation was reached after 24 interviews (see Figure 3), in line with Guest, "
    "Bunce and Johnson (2006).",
    "3 Findings",
    "Volunteers described the planning system as the main obstacle, echoing Moore (2015) and "
    "Paterson and Dunn (2009). Several interviewees mentioned the Localism Act (2011) as a turning "
    "point, a view shared in the literature (Field 2015; Thompsen 2020).",
    "References",
    "Bailey, N. (2012) 'The role, organisation and contribution of community enterprise to urban "
    "regeneration policy in the UK', Progress in Planning, 77(1), pp. 1\u201335. "
    "doi: 10.1016/j.progress.2011.11.001",
    "Braun, V. and Clarke, V. (2006) 'Using thematic analysis in psychology', Qualitative Research "
    "in Psychology, 3(2), pp. 77\u2013101. doi: 10.1191/1478088706qp063oa",
    "Bunce, S. (2016) 'Pursuing urban commons: politics and alliances in community land trust "
    "activism in East London', Antipode, 48(1), pp. 134\u2013150. doi: 10.1111/anti.12168",
    "Davis, J.E. (ed.) (2010) The community land trust reader. Cambridge, MA: Lincoln Institute of "
    "Land Policy.",
    "Engelsman, U., Rowe, M. and Southern, A. (2016) 'Community land trusts: a radical or reformist "
    "response to the housing question today?', ACME, 15(3), pp. 590\u2013615.",
    "Field, M. (2015) Creating community-led and self-build homes. Bristol: Policy Press.",
    "Guest, G., Bunce, A. and Johnson, L. (2006) 'How many interviews are enough?', Field Methods, "
    "18(1), pp. 59\u201382. doi: 10.1177/1525822X05279903",
    "Moore, T. (2018) 'Replication through partnership: the evolution of partnerships between "
    "community land trusts and housing associations in England', International Journal of Housing "
    "Policy, 18(1), pp. 82\u2013102. doi: 10.1080/19491247.2016.1198082",
    "Moore, T. and McKee, K. (2012) 'Empowering local communities? An international review of "
    "community land trusts', Housing Studies, 27(2), pp. 280\u2013290. doi: 10.108O/02673037.2012.647306",
    "ONS (2022) Housing affordability in England and Wales: 2021. Newport: Office for National "
    "Statistics.",
    "Paterson, E. and Dunn, M. (2009) 'Perspectives on utilising community land trusts as a vehicle "
    "for affordable housing provision', Local Environment, 14(8), pp. 749\u2013764.",
    "Rowe, M. (2014) Community-led housing in rural England. York: Joseph Rowntree Foundation.",
    "Thompson, M. (2020) Reconstructing public housing: Liverpool's hidden history of collective "
    "alternatives. Liverpool: Liverpool University Press.",
]

VANCOUVER_ASTHMA = [
    "Adherence to Inhaled Corticosteroids among Adolescents with Asthma",
    "Master of Public Health thesis",
    "Introduction",
    "Asthma is the most common chronic disease of childhood and affects an estimated 262 million "
    "people worldwide (1). Inhaled corticosteroids reduce exacerbations and hospital admissions "
    "(2-4), yet adherence among adolescents rarely exceeds 50% (5,6). Since 2019, national "
    "guidelines have recommended as-needed combination therapy for mild asthma (7).",
    "Reasons for non-adherence include forgetfulness, beliefs about medicines and the wish to be "
    "like peers (8, 9). Electronic monitoring gives more accurate estimates than self-report "
    "(10-12), and text-message reminders have been tested in several trials (13,14).",
    "Methods",
    "We analysed dispensing records of 2,311 adolescents aged 12 to 17 years (Table 1). Adherence "
    "was expressed as the proportion of days covered (PDC) as defined in (15). Model 2 adjusted for "
    "age, sex and deprivation (16), and sensitivity analyses followed (17, 18).",
    "Results and discussion",
    "Median PDC was 0.38 (IQR 0.21-0.57). Lower adherence in deprived areas (Figure 2) matches "
    "previous reports (6,19), and the effect of reminders was small (14).",
    "References",
    "1. Global Asthma Network. The Global Asthma Report 2018. Auckland: Global Asthma Network; 2018.",
    "2. Suissa S, Ernst P, Benayoun S, Baltzan M, Cai B. Low-dose inhaled corticosteroids and the "
    "prevention of death from asthma. N Engl J Med. 2000;343(5):332-6. "
    "doi:10.1056/NEJM200008033430504",
    "3. Pauwels RA, Pedersen S, Busse WW, Tan WC, Chen YZ, Ohlsson SV, et al. Early intervention "
    "with budesonide in mild persistent asthma: a randomised, double-blind trial. Lancet. "
    "2003;361(9363):1071-6.",
    "4. Sullivan SD, Buxton M, Andersson LF, Lamm CJ, Liljas B, Chen YZ, et al. "
    "Cost-effectiveness analysis of early intervention with budesonide in mild persistent "
    "asthma. J Allergy Clin Immunol. 2003;112(6):1229-36.",
    "5. McQuaid EL, Kopel SJ, Klein RB, Fritz GK. Medication adherence in pediatric asthma: "
    "reasoning, responsibility, and behavior. J Pediatr Psychol. 2003;28(5):323-33. "
    "doi:10.1O93/jpepsy/jsg022",
    "6. Desager K, Vermeulen F, Bodart E. Adherence to asthma treatment in childhood and "
    "adolescence - a narrative literature review. Acta Clin Belg. 2018;73(5):348-55.",
    "7. Global Initiative for Asthma. Global strategy for asthma management and prevention. "
    "Fontana (WI): GINA; 2019.",
    "8. Horne R, Weinman J. Self-regulation and self-management in asthma: exploring the role of "
    "illness perceptions and treatment beliefs. Psychol Health. 2002;17(1):17-32.",
    "9. Kaplan A, Price D. Treatment adherence in adolescents with asthma. J Asthma Allergy. "
    "2020;13:39-49. doi:10.2147/JAA.S233268",
    "10. Bender BG, Bartlett SJ, Rand CS, Turner C, Wamboldt FS, Zhang L. Impact of interview mode "
    "on accuracy of child and parent report of adherence with asthma-controller medication. "
    "Pediatrics. 2007;120(3):e471-7.",
    "11. Jentzsch NS, Camargos PA, Colosimo EA, Bousquet J. Monitoring adherence to beclomethasone "
    "in asthmatic children and adolescents through four different methods. Allergy. "
    "2009;64(10):1458-62. doi:10.1111/j.1398-9995.2009.02037.x",
    "12. Chan AH, Stewart AW, Harrison J, Camargo CA, Black PN, Mitchell EA. The effect of an "
    "electronic monitoring device with audiovisual reminder function on adherence to inhaled "
    "corticosteroids and school attendance in children with asthma: a randomised controlled "
    "trial. Lancet Respir Med. 2015;3(3):210-9.",
    "13. Strandbygaard U, Thomsen SF, Backer V. A daily SMS reminder increases adherence to asthma "
    "treatment: a three-month follow-up study. Respir Med. 2010;104(2):166-71. "
    "doi:10.1016/j.rmed.2009.10.003",
    "14. Johnson KB, Patterson BL, Ho YX, Chen Q, Nian H, Davison CL, et al. The feasibility of "
    "text reminders to improve medication adherence in adolescents with asthma. J Am Med Inform "
    "Assoc. 2016;23(3):449-55. doi:10.1093/jamia/ocv158",
    "15. Nau DP. Proportion of days covered (PDC) as a preferred method of measuring medication "
    "adherence. Springfield (VA): Pharmacy Quality Alliance; 2012.",
    "16. Williams LK, Pladevall M, Xi H, Peterson EL, Joseph C, Lafata JE, et al. Relationship "
    "between adherence to inhaled corticosteroids and poor outcomes among adults with asthma. "
    "J Allergy Clin Immunol. 2004;114(6):1288-93.",
    "17. Engelkes M, Janssens HM, de Jongste JC, Sturkenboom MC, Verhamme KM. Medication adherence "
    "and the risk of severe asthma exacerbations: a systematic review. Eur Respir J. "
    "2015;45(2):396-407. doi:10.1183/09031936.00075614",
    "19. Bousquet J, Humbert M, Gibson PG, Kostikas K, Jaumont X, Pfister P, et al. Real-world "
    "effectiveness of omalizumab in severe allergic asthma. Chest. 2021;159(2):496-506. "
    "doi:10.1016/j.chest.2020.08.2083",
    "20. Lycett H, Wildman E, Raebel EM, Sherlock JP, Kenny T, Chan AHY. Treatment perceptions in "
    "patients with asthma: synthesis of factors influencing adherence. Respir Med. "
    "2018;141:180-9. doi:10.1016/j.rmed.2018.06.032",
]


def main() -> None:
    (HERE / "apa_nursing.docx").write_bytes(make_docx(APA_NURSING))
    (HERE / "german_lehrkraefte.docx").write_bytes(
        make_docx(GERMAN_LEHRKRAEFTE, footnotes=GERMAN_FOOTNOTES)
    )
    (HERE / "harvard_housing.pdf").write_bytes(text_pdf(HARVARD_HOUSING))
    (HERE / "vancouver_asthma.pdf").write_bytes(
        text_pdf(VANCOUVER_ASTHMA, header="Adherence in adolescent asthma")
    )


if __name__ == "__main__":
    main()
