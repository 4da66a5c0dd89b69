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

VANCOUVER_WEIGHT: list[list[str | int]] = [
    ["App-Supported Weight Loss in Primary Care: A Feasibility Study"],
    ["MSc thesis in Clinical Nutrition"],
    ["Introduction"],
    [
        "Obesity affects about one in eight adults worldwide (1). Even modest weight loss of 5% "
        "improves glycaemic control and blood pressure (2\u20134), and primary care is well placed "
        "to offer it (5, 6). Smartphone applications promise to extend counselling beyond the "
        "consultation (7,9\u201311), although early versions were of poor quality (8).",
    ],
    [
        "Participants were eligible if they (1) were aged 18\u201365 years, (2) had a body mass "
        "index (BMI) of 30 or more and (3) owned a smartphone. These criteria follow an earlier "
        "trial (12) and the national guideline (13).",
    ],
    ["Methods"],
    [
        "Weight was measured at baseline and after 12 weeks (Table 1). The primary outcome was the ",
        "proportion of participants losing at least 5% of their weight (14",
        "). Adherence was defined as logging meals on at least 4 days per week (15,16).",
    ],
    ["Discussion"],
    [
        "Weight loss was comparable to that of nurse-led programmes (5,17) but lower than in "
        "commercial programmes (18). Engagement declined after week 6, as in most app studies "
        "(19, 20).",
    ],
    ["References"],
    [
        "1. NCD Risk Factor Collaboration. Worldwide trends in underweight and obesity from 1990 to "
        "2022. Lancet. 2024;403(10431):1027-50. doi:10.1016/S0140-6736(23)02750-2"
    ],
    [
        "2. Wing RR, Lang W, Wadden TA, Safford M, Knowler WC, Bertoni AG, et al. Benefits of modest "
        "weight loss in improving cardiovascular risk factors in overweight and obese individuals "
        "with type 2 diabetes. Diabetes Care. 2011;34(7):1481-6."
    ],
    [
        "3. Lean ME, Leslie WS, Barnes AC, Brosnahan N, Thom G, McCombie L, et al. Primary "
        "care-led weight management for remission of type 2 diabetes (DiRECT). Lancet. "
        "2018;391(10120):541-51. doi:10.1016/S0140-6736(17)33102-1"
    ],
    [
        "4. Neter JE, Stam BE, Kok FJ, Grobbee DE, Geleijnse JM. Influence of weight reduction on "
        "blood pressure: a meta-analysis. Hypertension. 2003;42(5):878-84."
    ],
    [
        "5. Aveyard P, Lewis A, Tearne S, Hood K, Christian-Brown A, Adab P, et al. Screening and "
        "brief intervention for obesity in primary care. Lancet. 2016;388(10059):2492-500."
    ],
    [
        "6. Tsai AG, Wadden TA. Treatment of obesity in primary care practice in the United States. "
        "Med Clin North Am. 2009;93(5):1073-81."
    ],
    [
        "7. Flores Mateo G, Granado-Font E, Ferré-Grau C, Montaña-Carreras X. Mobile phone apps to "
        "promote weight loss and increase physical activity: a systematic review and meta-analysis. "
        "J Med Internet Res. 2015;17(11):e253. doi:10.2196/jmir.4836"
    ],
    [
        "8. Pagoto S, Schneider K, Jojic M, DeBiasse M, Mann D. Evidence-based strategies in "
        "weight-loss mobile apps. Am J Prev Med. 2013;45(5):576-82."
    ],
    [
        "9. Laing BY, Mangione CM, Tseng CH, Leng M, Vaisberg E, Mahida M, et al. Effectiveness of a "
        "smartphone application for weight loss compared with usual care in overweight primary care "
        "patients. Ann Intern Med. 2014;161(10 Suppl):S5-12."
    ],
    [
        "10. Carter MC, Burley VJ, Nykjaer C, Cade JE. Adherence to a smartphone application for "
        "weight loss compared to website and paper diary. J Med Internet Res. 2013;15(4):e32."
    ],
    [
        "11. Antoun J, Itani H, Alarab N, Elsehmawy A. The effectiveness of smartphone apps in "
        "improving healthy lifestyle behaviors: systematic review. JMIR Mhealth Uhealth. "
        "2022;10(1):e30702. doi:10.2196/"
    ],
    [
        "12. Jebb SA, Ahern AL, Olson AD, Aston LM, Holzapfel C, Stoll J, et al. Primary care "
        "referral to a commercial provider for weight loss treatment versus standard care. Lancet. "
        "2011;378(9801):1485-92."
    ],
    [
        "13. National Institute for Health and Care Excellence. Obesity: identification, "
        "assessment and management. Clinical guideline CG189. London: NICE; 2014."
    ],
    [
        "14. Williamson DA, Bray GA, Ryan DH. Is 5% weight loss a satisfactory criterion to define "
        "clinically significant weight loss? Obesity. 2015;23(12):2319-20. doi:10.1002/oby.21358"
    ],
    [
        "15. Burke LE, Wang J, Sevick MA. Self-monitoring in weight loss: a systematic review of "
        "the literature. J Am Diet Assoc. 2011;111(1):92-102."
    ],
    [
        "16. Turner-McGrievy GM, Dunn CG, Wilcox S, Boutté AK, Hutto B, Hoover A, et al. Defining "
        "adherence to mobile dietary self-monitoring. J Acad Nutr Diet. 2019;119(9):1516-24."
    ],
    [
        "17. Ahern AL, Wheeler GM, Aveyard P, Boyland EJ, Halford JCG, Mander AP, et al. Extended "
        "and standard duration weight-loss programme referrals for adults in primary care (WRAP). "
        "Lancet. 2017;389(10085):2214-25."
    ],
    [
        "18. Gudzune KA, Doshi RS, Mehta AK, Chaudhry ZW, Jacobs DK, Vakil RM, et al. Efficacy of "
        "commercial weight-loss programs: an updated systematic review. Ann Intern Med. "
        "2015;162(7):501-12."
    ],
    [
        "19. Helander E, Kaipainen K, Korhonen I, Wansink B. Factors related to sustained use of a "
        "free mobile app for dietary self-monitoring with photography and peer feedback. J Med "
        "Internet Res. 2014;16(4):e109."
    ],
    [
        "21. Lyzwinski LN. A systematic review and meta-analysis of mobile devices and weight loss "
        "with an intervention content analysis. J Pers Med. 2014;4(3):311-85."
    ],
]

APA_REMOTE = [
    "Remote Work, Autonomy and Exhaustion: A Diary Study among Knowledge Workers",
    "Master's thesis in Work and Organisational Psychology",
    "1. Introduction",
    "In 2020 the pandemic moved millions of office workers to their kitchen tables almost "
    "overnight. Telework had been studied for decades (Gajendran & Harrison, 2007, pp. "
    "1524\u20131525), but mostly as a voluntary arrangement for a minority (e.g., Felstead & "
    "Henseke, 2017). Golden, Veiga, and Simsek (2006) showed that its effects depend on how "
    "intensively it is used, and a field experiment confirmed productivity gains (Bloom et al., "
    "2015, Table 2).",
    "Autonomy is the mechanism most often proposed (Choudhury, Foroughi, & Larson, 2021; "
    "O'Neill, 2009). Job insecurity, by contrast, drains resources (Vander Elst et al., 2017), "
    "and blurred boundaries between work and home raise exhaustion (Wang et al., 2021a). "
    "Felstead (2022) summarises the British evidence.",
    "2. Hypotheses",
    "We expected daily autonomy to reduce exhaustion (Hypothesis 1) and boundary blurring to "
    "increase it (Hypothesis 2), in line with earlier studies (Golden et al., 2008; Gajendren & "
    "Harrison, 2007). Organisational support should buffer both effects (Kossek, 2016).",
    "3. Results",
    "Autonomy predicted lower exhaustion (b = -0.21, p = .003; see Table 4), which "
    "replicates Wang et al. (2021a) and O'Neill (2009).",
    "References",
    "Bloom, N., Liang, J., Roberts, J., & Ying, Z. J. (2015). Does working from home work? "
    "Evidence from a Chinese experiment. The Quarterly Journal of Economics, 130(1), 165\u2013218. "
    "https://doi.org/10.1093/qje/qju032",
    "Choudhury, P., Foroughi, C., & Larson, B. (2021). Work-from-anywhere: The productivity "
    "effects of geographic flexibility. Strategic Management Journal, 42(4), 655\u2013683. "
    "https://doi.org/10.1002/smj.3251",
    "Felstead, A. (2022). Remote working: A research overview. Routledge.",
    "Felstead, A. (2022). The geography of remote work in Britain. Regional Studies, 56(9), "
    "1\u201315.",
    "Felstead, A., & Henseke, G. (2017). Assessing the growth of remote working and its "
    "consequences for effort, well-being and work-life balance. New Technology, Work and "
    "Employment, 32(3), 195\u2013212. https://doi.org/10.1111/ntwe.12097",
    "Gajendran, R. S., & Harrison, D. A. (2007). The good, the bad, and the unknown about "
    "telecommuting: Meta-analysis of psychological mediators and individual consequences. "
    "Journal of Applied Psychology, 92(6), 1524\u20131541. https://doi.org/10.1037/0021-9010.92.6.1524",
    "Golden, T. D., Veiga, J. F., & Simsek, Z. (2006). Telecommuting's differential impact on "
    "work-family conflict. Journal of Applied Psychology, 91(6), 1340\u20131350. "
    "https://doi.org/10.1037/0021-9010.91.6.1340",
    "O'Neill, T. A. (2009). Predicting teleworker success: An exploration of personality, "
    "motivational, situational, and job characteristics. New Technology, Work and Employment, "
    "24(2), 144\u2013162.",
    "Vander Elst, T., Verhoogen, R., Sercu, M., Van den Broeck, A., Baillien, E., & Godderis, L. "
    "(2017). Not extent of telecommuting, but job characteristics as proximal predictors of work-"
    "related well-being. Journal of Occupational and Environmental Medicine, 59(10), "
    "e180\u2013e186. https://doi.org/10.1097/JOM.0000000000001132",
    "Wang, B., Liu, Y., Qian, J., & Parker, S. K. (2021a). Achieving effective remote working "
    "during the COVID-19 pandemic: A work design perspective. Applied Psychology, 70(1), "
    "16\u201359. https://doi.org/10.1111/apps.l2290",
    "Wang, B., Liu, Y., Qian, J., & Parker, S. K. (2021b). Remote work and boundary management. "
    "Journal of Occupational Health Psychology, 26(4), 301\u2013315. doi:10.1037/ocp0000/281",
]


def main() -> None:
    (HERE / "apa_nursing.docx").write_bytes(make_docx(APA_NURSING))
    (HERE / "german_lehrkraefte.docx").write_bytes(
        make_docx(GERMAN_LEHRKRAEFTE, footnotes=GERMAN_FOOTNOTES)
    )
    (HERE / "vancouver_weight.docx").write_bytes(make_docx(VANCOUVER_WEIGHT))
    (HERE / "apa_remote_work.pdf").write_bytes(
        text_pdf(APA_REMOTE, header="Remote work and exhaustion")
    )
    (HERE / "harvard_housing.pdf").write_bytes(text_pdf(HARVARD_HOUSING))
    (HERE / "vancouver_asthma.pdf").write_bytes(
        text_pdf(VANCOUVER_ASTHMA, header="Adherence in adolescent asthma")
    )


if __name__ == "__main__":
    main()
