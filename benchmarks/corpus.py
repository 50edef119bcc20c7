"""A deterministic synthetic corpus of agent memories and questions about them (no external data).

Sentences come from templates filled from word lists with a seeded ``random.Random``, so a given
``(seed, n)`` always yields the same texts, and the first ``n`` texts of a larger corpus are the
texts of a smaller one. They read like what an assistant remembers about its users: people, places,
food, work, plans, preferences, dates and numbers; common words ("likes", "work", "weekend") occur in
many memories, names and places in a few, as in real memory stores.
"""

from __future__ import annotations

import random

FIRST = (
    "Alice Bob Carla Dmitri Elena Farid Grace Hiro Ines Jamal Kenji Lena Mateo Nadia Omar Priya Quentin "
    "Rosa Sven Tariq Uma Viktor Wen Ximena Yusuf Zoe Aaron Bianca Chen Dara Emeka Fatima Gustav Hana Ivan "
    "Jonas Keira Luca Mei Nikhil Olga Pablo Rania Sofia Tomas Ulla Vera Walter Yara Zain Amara Bruno "
    "Celine Diego Esther Felix Greta Hugo Ingrid Joao Kofi Liam Maya Noor Oscar Paula Ravi Sara Theo"
).split()
LAST = (
    "Smith Garcia Nakamura Okafor Rossi Novak Haddad Jensen Kowalski Silva Müller Dubois Ivanova Khan "
    "Larsen Moreau Popescu Santos Tanaka Weber Yilmaz Andersen Costa Fischer Horvat Lindqvist Mendes"
).split()
CITIES = (
    "Lisbon Porto Madrid Seville Paris Lyon Berlin Hamburg Munich Vienna Prague Krakow Warsaw Oslo "
    "Stockholm Helsinki Copenhagen Amsterdam Rotterdam Brussels Dublin Edinburgh London Manchester "
    "Reykjavik Rome Milan Naples Athens Istanbul Cairo Nairobi Lagos Accra Casablanca Tokyo Osaka Kyoto "
    "Seoul Busan Taipei Manila Hanoi Bangkok Singapore Jakarta Mumbai Delhi Bangalore Karachi Dubai "
    "Toronto Montreal Vancouver Boston Chicago Denver Austin Seattle Portland Mexico-City Bogota Lima "
    "Santiago Buenos-Aires Montevideo Sydney Melbourne Auckland Wellington"
).split()
FOODS = [
    "ramen",
    "sourdough bread",
    "green curry",
    "tacos al pastor",
    "mushroom risotto",
    "falafel",
    "pho",
    "dark chocolate",
    "oat milk lattes",
    "sushi",
    "lentil soup",
    "pizza margherita",
    "kimchi",
    "paella",
    "dumplings",
    "goat cheese",
    "espresso",
    "matcha",
    "blueberry pancakes",
    "jollof rice",
    "pad thai",
    "baklava",
    "spicy food",
    "vegan burgers",
    "grilled sardines",
    "empanadas",
]
HOBBIES = [
    "bouldering",
    "trail running",
    "watercolour painting",
    "playing the cello",
    "chess",
    "birdwatching",
    "sailing",
    "pottery",
    "salsa dancing",
    "woodworking",
    "photography",
    "gardening",
    "open-water swimming",
    "knitting",
    "learning Japanese",
    "board games",
    "cycling",
    "baking bread",
    "astronomy",
    "yoga",
    "fly fishing",
    "skiing",
    "writing poetry",
    "restoring old motorbikes",
    "volunteering at a shelter",
]
JOBS = [
    "nurse",
    "data engineer",
    "high-school teacher",
    "architect",
    "pharmacist",
    "product manager",
    "civil engineer",
    "journalist",
    "veterinarian",
    "accountant",
    "UX designer",
    "paramedic",
    "lawyer",
    "chef",
    "research biologist",
    "electrician",
    "translator",
    "airline pilot",
    "social worker",
    "firmware developer",
    "physiotherapist",
    "librarian",
    "marine biologist",
    "real-estate agent",
]
COMPANIES = [
    "Northwind",
    "Acme Logistics",
    "Blue Harbor Bank",
    "Helios Energy",
    "Quartz Health",
    "Pinecone Labs",
    "Orbital Freight",
    "Maple Insurance",
    "Redwood Analytics",
    "Sunrise Bakery",
    "Tidewater Shipping",
    "Kestrel Robotics",
    "Lumen Media",
    "Granite Construction",
    "Cobalt Software",
    "Juniper Clinics",
]
THINGS = [
    "laptop",
    "passport",
    "bicycle",
    "car",
    "apartment lease",
    "phone plan",
    "gym membership",
    "health insurance",
    "standing desk",
    "coffee grinder",
    "electric scooter",
    "camera",
    "guitar",
    "winter coat",
    "hiking boots",
    "tax return",
    "library card",
    "train pass",
    "dog",
    "cat",
]
PETS = ["a golden retriever", "two cats", "a parrot", "a rescue greyhound", "a tortoise", "a beagle"]
RELATIONS = ["sister", "brother", "mother", "father", "partner", "best friend", "colleague", "neighbour"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = "January February March April May June July August September October November December".split()
FEELINGS = ["excited", "nervous", "frustrated", "relieved", "curious", "worried", "thrilled", "tired"]
EVENTS = [
    "a job interview",
    "a marathon",
    "a wedding",
    "a dentist appointment",
    "a product launch",
    "a conference talk",
    "a piano recital",
    "a house move",
    "a court hearing",
    "a team offsite",
    "a birthday party",
    "a visa appointment",
    "a surgery",
    "a final exam",
    "a charity run",
]
TOPICS = [
    "the quarterly budget",
    "the database migration",
    "a refund for a broken order",
    "their mortgage",
    "the new onboarding flow",
    "a delayed shipment",
    "the holiday schedule",
    "a billing error",
    "the security audit",
    "their thesis",
    "the school application",
    "a kitchen renovation",
]

TEMPLATES = [
    "{name} prefers {food} and usually orders it on {day}s.",
    "{name} is allergic to {food2}, so avoid suggesting it.",
    "{name} works as a {job} at {company} in {city}.",
    "{name} moved from {city} to {city2} in {month} {year}.",
    "{name} has been into {hobby} since {year} and goes every {day}.",
    "{name}'s {relation} lives in {city} and visits every {month}.",
    "{name} has {pet} and asked for pet-friendly hotels in {city}.",
    "{name} is {feeling} about {event} on {month} {dom}.",
    "{name} asked for help with {topic} before the end of {month}.",
    "{name} lost their {thing} in {city} and reported it on {day}.",
    "{name} bought a new {thing} for {amount} euros last {month}.",
    "{name} wants to learn {hobby} with their {relation} this year.",
    "{name} dislikes early meetings and prefers calls after {hour} pm.",
    "{name} is planning a trip to {city} with their {relation} in {month}.",
    "{name} said the meeting with {company} about {topic} went badly.",
    "{name} switched jobs from {company} to {company2} to become a {job}.",
    "{name}'s favourite place to eat {food} is a small cafe in {city}.",
    "{name} runs {distance} kilometres on {day} mornings before work.",
    "{name} needs a reminder about {event} {lead} days in advance.",
    "{name} renewed their {thing} and the new one expires in {year2}.",
    "The user {name} speaks {lang} at home and English at work.",
    "{name} celebrated their {age}th birthday in {city} with {food}.",
    "{name} gave a talk at {company} about {hobby} and {topic}.",
    "{name} is saving {amount} euros a month for a flat in {city}.",
    "{name} mentioned that their {relation} works as a {job} in {city}.",
    "{name} cancelled {event} because of a cold and felt {feeling}.",
    "{name} likes to unwind with {hobby} and a plate of {food} on weekends.",
    "{name} recommends {company} for anyone who needs a {job} in {city}.",
]
QUESTIONS = [
    "What food does {name} like?",
    "Where does {name} work?",
    "What is {name}'s job?",
    "Where did {name} move to?",
    "What hobby does {name} have?",
    "Where does {name}'s {relation} live?",
    "Does {name} have any pets?",
    "How does {name} feel about {event}?",
    "What did {name} need help with?",
    "Where did {name} lose the {thing}?",
    "How much did {name} pay for the {thing}?",
    "When is {name} travelling to {city}?",
    "Who is allergic to {food}?",
    "Who lives in {city}?",
    "Which people work at {company}?",
    "Who enjoys {hobby}?",
    "When does {name} prefer to have meetings?",
    "What languages does {name} speak?",
    "Who is planning a trip with their {relation}?",
    "Is anyone nervous about {event}?",
    "What happened with {topic}?",
    "Who recommended {company}?",
    "How far does {name} run?",
    "Who is saving money for a flat in {city}?",
    "What does {name} do on weekends?",
]
LANGS = ["Portuguese", "Hindi", "Polish", "Korean", "Swahili", "Arabic", "Dutch", "Tagalog", "Greek"]


def _slots(rng: random.Random) -> dict[str, object]:
    return {
        "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}" if rng.random() < 0.6 else rng.choice(FIRST),
        "food": rng.choice(FOODS),
        "food2": rng.choice(FOODS),
        "day": rng.choice(DAYS),
        "job": rng.choice(JOBS),
        "company": rng.choice(COMPANIES),
        "company2": rng.choice(COMPANIES),
        "city": rng.choice(CITIES).replace("-", " "),
        "city2": rng.choice(CITIES).replace("-", " "),
        "month": rng.choice(MONTHS),
        "year": rng.randint(1995, 2025),
        "year2": rng.randint(2026, 2035),
        "dom": rng.randint(1, 28),
        "hobby": rng.choice(HOBBIES),
        "relation": rng.choice(RELATIONS),
        "pet": rng.choice(PETS),
        "feeling": rng.choice(FEELINGS),
        "event": rng.choice(EVENTS),
        "topic": rng.choice(TOPICS),
        "thing": rng.choice(THINGS),
        "amount": rng.choice([40, 85, 120, 250, 300, 480, 750, 1200, 1999, 2500]),
        "hour": rng.randint(1, 5),
        "distance": rng.choice([3, 5, 8, 10, 12, 15, 21]),
        "lead": rng.choice([1, 2, 3, 5, 7, 14]),
        "lang": rng.choice(LANGS),
        "age": rng.randint(18, 80),
    }


def memories(n: int, seed: int = 42) -> list[str]:
    """``n`` distinct memory sentences; a prefix of ``memories(m, seed)`` for any ``m > n``."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        text = rng.choice(TEMPLATES).format(**_slots(rng))
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def questions(n: int, seed: int = 1000) -> list[str]:
    """``n`` distinct questions about the people, places and things of the corpus."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        text = rng.choice(QUESTIONS).format(**_slots(rng))
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out
